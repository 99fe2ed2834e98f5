// See test_certs.h.
#include "common/test_certs.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace xmod {
namespace {

absl::Status Sh(const std::string& dir, const std::string& command) {
  const std::string line = absl::StrCat("cd '", dir, "' && ", command, " >/dev/null 2>&1");
  if (std::system(line.c_str()) != 0) return absl::InternalError("failed: " + command);
  return absl::OkStatus();
}

constexpr char kNewKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

}  // namespace

absl::Status MakeTestCa(const std::string& dir, const std::string& name) {
  return Sh(dir, absl::StrCat("openssl req -x509 ", kNewKey, " -days 2 -subj /CN=", name,
                              " -keyout ", name, ".key -out ", name, ".pem"));
}

absl::Status MakeTestCert(const std::string& dir, const std::string& ca, const std::string& name,
                          const std::string& san) {
  const std::string ext = san.empty() ? "basicConstraints=CA:FALSE" : "subjectAltName=" + san;
  if (absl::Status s = WriteFileAtomic(absl::StrCat(dir, "/", name, ".ext"), ext + "\n"); !s.ok()) {
    return s;
  }
  if (absl::Status s = Sh(dir, absl::StrCat("openssl req ", kNewKey, " -subj /CN=", name,
                                            " -keyout ", name, ".key -out ", name, ".csr"));
      !s.ok()) {
    return s;
  }
  return Sh(dir, absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                              ".key -CAcreateserial -days 2 -out ", name, ".pem -extfile ", name,
                              ".ext"));
}

}  // namespace xmod
