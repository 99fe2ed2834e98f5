// What this build is: the project version (CMake project(VERSION)), the git commit and the
// build type, captured when CMake configured the tree (build_info_values.h.in). Every binary
// prints VersionLine for --version, and the coordinator and worker export it as the
// Prometheus gauge xmod_build_info{version, git_sha} = 1. LibTorch-free; thread-safe.
#ifndef XMOD_COMMON_BUILD_INFO_H_
#define XMOD_COMMON_BUILD_INFO_H_

#include <string>

#include "absl/strings/string_view.h"

namespace xmod {

absl::string_view BuildVersion();  // "0.1.0"
absl::string_view BuildGitSha();   // short commit of HEAD; "unknown" outside a git checkout
absl::string_view BuildType();     // CMAKE_BUILD_TYPE, e.g. "RelWithDebInfo"

// "NAME VERSION (git SHA, BUILD_TYPE)", or with `extra` (e.g. "LibTorch 2.1.0") appended
// inside the parentheses. No newline.
std::string VersionLine(absl::string_view name, absl::string_view extra = "");

}  // namespace xmod

#endif  // XMOD_COMMON_BUILD_INFO_H_
