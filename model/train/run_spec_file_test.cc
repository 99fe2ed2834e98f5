// Tests of RunSpec files: the three encodings, parse errors and unknown extensions.
#include "model/train/run_spec_file.h"

#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class RunSpecFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ("run_spec_file_test_" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, contents).ok());
    return path;
  }
  std::string dir_;
};

TEST_F(RunSpecFileTest, ReadsTextJsonAndBinary) {
  absl::StatusOr<xmod::v1::RunSpec> text =
      ReadRunSpec(Write("a.textpb", "model { arch: XMOD k: 8 } training { seq_len: 256 }"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->model().k(), 8);
  EXPECT_EQ(text->training().seq_len(), 256);

  absl::StatusOr<xmod::v1::RunSpec> json =
      ReadRunSpec(Write("a.json", R"({"model": {"arch": "DENSE"}, "checkpointDir": "/c"})"));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->model().arch(), xmod::v1::DENSE);
  EXPECT_EQ(json->checkpoint_dir(), "/c");

  absl::StatusOr<xmod::v1::RunSpec> binary = ReadRunSpec(Write("a.pb", text->SerializeAsString()));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ(binary->model().k(), 8);
}

TEST_F(RunSpecFileTest, ErrorsNameTheFlagAndPosition) {
  absl::StatusOr<xmod::v1::RunSpec> bad = ReadRunSpec(Write("b.textpb", "model {\n  kk: 3 }"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--spec"));
  EXPECT_THAT(bad.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(ReadRunSpec(Write("c.yaml", "")).status().message(), HasSubstr("unknown extension"));
  EXPECT_TRUE(absl::IsNotFound(ReadRunSpec(dir_ + "/missing.json").status()));
}

}  // namespace
}  // namespace xmod
