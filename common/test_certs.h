// Test certificates made with the `openssl` command at test time: a CA and certificates it
// signs, as PEM files in a folder. For the TLS tests of the coordinator and its clients.
#ifndef XMOD_COMMON_TEST_CERTS_H_
#define XMOD_COMMON_TEST_CERTS_H_

#include <string>

#include "absl/status/status.h"

namespace xmod {

// A self-signed CA: DIR/NAME.pem and DIR/NAME.key (EC P-256, valid two days).
absl::Status MakeTestCa(const std::string& dir, const std::string& name);

// DIR/NAME.pem and DIR/NAME.key signed by CA `ca` of the same folder, with the subject
// alternative names `san` (e.g. "IP:127.0.0.1,DNS:localhost"; empty for a client).
absl::Status MakeTestCert(const std::string& dir, const std::string& ca, const std::string& name,
                          const std::string& san);

}  // namespace xmod

#endif  // XMOD_COMMON_TEST_CERTS_H_
