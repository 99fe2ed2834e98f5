// A study's fit settings (StudySpec seed, bootstrap_samples; coordinator/fitting/studies.h):
// given ones are kept, unset ones are the member sweeps' FitPlan values, so the B.4 study is
// one study whichever way it is created — the README's `xmodctl study create b4 --member
// kxl=1 --member nact=2 --member axk=3` (no settings) and examples/paper/b4_study.textpb.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

xmod::v1::StudySpec ParseStudy(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  xmod::v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text.value_or(""), &spec)) << path;
  return spec;
}

TEST(StudySettingsTest, TheB4StudyIsOneStudyFromTheReadmesFlagsOrTheFile) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  const std::string dir = NewTestDir("study-settings");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::Coordinator::Stub& user = *c->user;
  // The README's study: sweeps 1, 2, 3 = the B.4 sweeps, submitted in that order.
  xmod::v1::CreateStudyRequest readme;
  readme.mutable_spec()->set_name("b4");
  for (const char* role : {"kxl", "nact", "axk"}) {
    xmod::v1::SubmitSweepRequest submit;
    absl::StatusOr<std::string> text =
        ReadFile(absl::StrCat(source, "/examples/paper/b4_", role, ".textpb"));
    ASSERT_TRUE(text.ok()) << text.status();
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, submit.mutable_spec()));
    xmod::v1::SubmitSweepResponse submitted;
    grpc::Status status = user.SubmitSweep(BearerContext("").get(), submit, &submitted);
    ASSERT_TRUE(status.ok()) << role << ": " << status.error_message();
    xmod::v1::StudyMember* member = readme.mutable_spec()->add_members();
    member->set_role(role);
    member->set_sweep_id(submitted.sweep_id());
  }
  EXPECT_EQ(readme.spec().members(2).sweep_id(), 3);
  xmod::v1::CreateStudyRequest file;
  *file.mutable_spec() = ParseStudy(absl::StrCat(source, "/examples/paper/b4_study.textpb"));
  file.set_dry_run(true);  // the README's study is created for real below

  xmod::v1::Study from_file, from_flags;
  grpc::Status status = user.CreateStudy(BearerContext("").get(), file, &from_file);
  ASSERT_TRUE(status.ok()) << status.error_message();
  status = user.CreateStudy(BearerContext("").get(), readme, &from_flags);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // The B.4 sweeps' fit plans: seed 7, 200 bootstrap refits (B.5).
  for (const xmod::v1::Study* study : {&from_file, &from_flags}) {
    EXPECT_TRUE(study->spec().has_seed() && study->spec().has_bootstrap_samples());
    EXPECT_EQ(study->spec().seed(), 7u);
    EXPECT_EQ(study->spec().bootstrap_samples(), 200);
  }
  EXPECT_EQ(from_flags.in_range_observations(), from_file.in_range_observations());
  // Stored with them: the fit the coordinator runs reads the stored spec.
  xmod::v1::GetStudyRequest get;
  get.set_name("b4");
  xmod::v1::Study stored;
  ASSERT_TRUE(user.GetStudy(BearerContext("").get(), get, &stored).ok());
  EXPECT_EQ(stored.spec().seed(), 7u);
  EXPECT_EQ(stored.spec().bootstrap_samples(), 200);
}

TEST(StudySettingsTest, GivenSettingsWinAndDisagreeingMembersAreRefused) {
  const std::string dir = NewTestDir("study-settings-members");
  absl::StatusOr<LoopbackCoordinator> c = StartLoopbackCoordinator(LoopbackOptions(dir));
  ASSERT_TRUE(c.ok()) << c.status();
  xmod::v1::Coordinator::Stub& user = *c->user;
  std::vector<int64_t> ids;
  for (int seed : {3, 5}) {
    xmod::v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = TinySweep(dir);
    submit.mutable_spec()->set_name(absl::StrCat("tiny-", seed));
    submit.mutable_spec()->mutable_fit()->set_seed(seed);
    submit.mutable_spec()->mutable_fit()->set_bootstrap_samples(20);
    xmod::v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(user.SubmitSweep(BearerContext("").get(), submit, &submitted).ok());
    ids.push_back(submitted.sweep_id());
  }
  xmod::v1::CreateStudyRequest create;
  create.set_dry_run(true);
  create.mutable_spec()->set_name("mixed");
  for (int i = 0; i < 2; ++i) {
    xmod::v1::StudyMember* member = create.mutable_spec()->add_members();
    member->set_sweep_id(ids[i]);
    member->set_role(i == 0 ? "kxl" : "axk");
  }
  xmod::v1::Study study;
  grpc::Status status = user.CreateStudy(BearerContext("").get(), create, &study);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("seed: not given, and the member sweeps' fit.seed differ (members[0] "
                         "sweep ",
                         ids[0], " ('tiny-3'): 3, members[1] sweep ", ids[1],
                         " ('tiny-5'): 5); give the study's seed"));

  // A given seed (0 included) is kept; the bootstrap the members agree on is theirs.
  create.mutable_spec()->set_seed(0);
  status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(study.spec().seed(), 0u);
  EXPECT_EQ(study.spec().bootstrap_samples(), 20);
  create.mutable_spec()->set_bootstrap_samples(0);
  status = user.CreateStudy(BearerContext("").get(), create, &study);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(study.spec().bootstrap_samples(), 0);
}

}  // namespace
}  // namespace xmod
