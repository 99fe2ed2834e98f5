// Credentials file parsing, token matching (plain and sha256: secrets), scope checks and
// token reading from a file or the environment.
#include "common/credentials.h"

#include <cstdlib>
#include <fstream>

#include "common/auth.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr char kFile[] =
    "# scope name secret\n"
    "user alice alice-secret-0123456789\n"
    "read viewer viewer-secret-0123456789   # dashboards\n"
    "\n"
    "worker w1 w1-secret-0123456789abcdef\n"
    "admin ops ops-secret-0123456789abcd\n";

TEST(CredentialsTest, MapsEachSecretToItsPrincipal) {
  absl::StatusOr<CredentialSet> set = CredentialSet::Parse(kFile, "creds");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 4u);
  std::optional<Principal> p = set->Authenticate("w1-secret-0123456789abcdef");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->scope, Scope::kWorker);
  EXPECT_EQ(p->name, "w1");
  EXPECT_FALSE(p->anonymous);
  p = set->Authenticate("viewer-secret-0123456789");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->scope, Scope::kRead);
  p = set->Authenticate("ops-secret-0123456789abcd");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->scope, Scope::kAdmin);
  EXPECT_STREQ(ScopeName(p->scope), "admin");
  EXPECT_FALSE(set->Authenticate("alice-secret-012345678").has_value());  // a prefix
  EXPECT_FALSE(set->Authenticate("").has_value());
}

TEST(CredentialsTest, AcceptsSha256Digests) {
  const std::string line = "user bob sha256:" + Sha256Hex("bob-secret-0123456789") + "\n";
  absl::StatusOr<CredentialSet> set = CredentialSet::Parse(line, "creds");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(set->Authenticate("bob-secret-0123456789").has_value());
  EXPECT_FALSE(set->Authenticate("sha256:" + Sha256Hex("bob-secret-0123456789")).has_value());
}

TEST(CredentialsTest, BadLinesNameTheLineNeverTheSecret) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"user alice\n", "creds:1: expected \"SCOPE NAME SECRET\""},
      {"\nroot a 0123456789abcdefgh\n", "creds:2: unknown scope \"root\""},
      {"user a 0123456789abcdefgh\nadmin a 0123456789abcdefgX\n",
       "creds:2: \"a\" names both a user and an admin credential"},
      {"user a/b 0123456789abcdefgh\n", "creds:1: NAME must be"},
      {"user a short\n", "creds:1: the secret is shorter than 16 characters"},
      {"user a sha256:abc\n", "creds:1: a sha256: secret needs 64 hex digits"},
      {"worker w 0123456789abcdefgh\nworker w 0123456789abcdefgX\n",
       "creds:2: a second worker credential named \"w\""},
      {"user a 0123456789abcdefgh\nread b 0123456789abcdefgh\n",
       "creds:2: this secret is already used"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CredentialSet> set = CredentialSet::Parse(c.text, "creds");
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(set.status().message(), HasSubstr(c.message));
    EXPECT_THAT(set.status().message(), ::testing::Not(HasSubstr("0123456789")));
  }
}

TEST(AuthTest, ScopesAllowOnlyTheirCalls) {
  absl::StatusOr<CredentialSet> set = CredentialSet::Parse(kFile, "creds");
  ASSERT_TRUE(set.ok());
  const auto call = [&](const std::string& token, Access access) {
    return Authorize(*set, std::optional<std::string>("Bearer " + token), access, "Method")
        .status()
        .code();
  };
  EXPECT_EQ(call("alice-secret-0123456789", Access::kWrite), absl::StatusCode::kOk);
  EXPECT_EQ(call("alice-secret-0123456789", Access::kRead), absl::StatusCode::kOk);
  EXPECT_EQ(call("alice-secret-0123456789", Access::kWorker), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(call("viewer-secret-0123456789", Access::kRead), absl::StatusCode::kOk);
  EXPECT_EQ(call("viewer-secret-0123456789", Access::kWrite), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(call("w1-secret-0123456789abcdef", Access::kWorker), absl::StatusCode::kOk);
  // An admin may what a user may, and nothing a worker may.
  EXPECT_EQ(call("ops-secret-0123456789abcd", Access::kWrite), absl::StatusCode::kOk);
  EXPECT_EQ(call("ops-secret-0123456789abcd", Access::kRead), absl::StatusCode::kOk);
  EXPECT_EQ(call("ops-secret-0123456789abcd", Access::kWorker),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(call("w1-secret-0123456789abcdef", Access::kRead), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(call("nope-nope-nope-nope", Access::kRead), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(*set, std::nullopt, Access::kRead, "M").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      Authorize(*set, std::optional<std::string>("alice-secret-0123456789"), Access::kRead, "M")
          .status()
          .code(),
      absl::StatusCode::kUnauthenticated);
  // No credentials: everyone is the anonymous principal.
  absl::StatusOr<Principal> open = Authorize(CredentialSet(), std::nullopt, Access::kWrite, "M");
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->anonymous);
}

TEST(AuthTest, ReadsTokensFromAFileOrTheEnvironment) {
  const std::string path = testing::TempDir() + "/token";
  std::ofstream(path) << "  file-token-0123456789\n";
  EXPECT_EQ(*ReadToken(path, "XMOD_TEST_TOKEN"), "file-token-0123456789");
  setenv("XMOD_TEST_TOKEN", "env-token", 1);
  EXPECT_EQ(*ReadToken("", "XMOD_TEST_TOKEN"), "env-token");
  unsetenv("XMOD_TEST_TOKEN");
  EXPECT_EQ(*ReadToken("", "XMOD_TEST_TOKEN"), "");
  EXPECT_FALSE(ReadToken(path + ".missing", "XMOD_TEST_TOKEN").ok());
  std::ofstream(path) << "\n";
  EXPECT_EQ(ReadToken(path, "XMOD_TEST_TOKEN").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace xmod
