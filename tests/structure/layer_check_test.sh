#!/bin/bash
# The layer check (cmake/XmodLayers.cmake) on a copy of the tree: it passes as the tree is, and
# fails, naming the file, on each kind of violation injected into the copy — an include that
# goes up a top-level layer, one that goes up a coordinator sub-layer, a domain type in the
# store (rows and SQL only), SQL outside the store,
# and (in a minimal CMake project) a target that links a higher layer.
# Usage: layer_check_test.sh <source dir>
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# A fresh copy of the checked sources, without build outputs.
copy_tree() {
  rm -rf "$work/tree" && mkdir -p "$work/tree"
  (cd "$src" && git ls-files -z -- '*.h' '*.cc' 'cmake/*' | xargs -0 cp --parents -t "$work/tree")
}
check() { cmake -DXMOD_SOURCE_DIR="$work/tree" -P "$work/tree/cmake/XmodLayers.cmake" >"$work/out" 2>&1; }
expect_violation() {  # <what> <text the error must name>
  if check; then fail "$1: the check passed"; fi
  grep -qF "$2" "$work/out" || { cat "$work/out" >&2; fail "$1: the error does not name '$2'"; }
  echo "ok: $1"
}

copy_tree
check || { cat "$work/out" >&2; fail "the tree as committed fails the check"; }
echo "ok: the tree as committed passes"

echo '#include "coordinator/api/coordinator_service.h"' >>"$work/tree/coordinator/store/store.cc"
expect_violation "store/ including api/" \
  "coordinator/store/store.cc includes coordinator/api/coordinator_service.h, a higher layer"

copy_tree
echo '#include "coordinator/adaptive/adaptive_controller.h"' >>"$work/tree/coordinator/scheduling/scheduler.h"
expect_violation "scheduling/ including design/" \
  "coordinator/scheduling/scheduler.h includes coordinator/adaptive/adaptive_controller.h"

for domain in fitter/live_delta.h model/train/training_config.h; do
  copy_tree
  echo "#include \"$domain\"" >>"$work/tree/coordinator/store/pilot_rows.h"
  expect_violation "store/ including $domain" \
    "coordinator/store/pilot_rows.h includes $domain, which is not rows or SQL"
done

copy_tree
echo '#include "coordinator/store/store.h"' >>"$work/tree/fitter/recommend.cc"
expect_violation "fitter/ including coordinator/" "fitter/recommend.cc includes coordinator/store/store.h"

copy_tree
printf 'constexpr char kCount[] = "SELECT COUNT(*) FROM runs";\n' >>"$work/tree/coordinator/scheduling/heartbeats.cc"
expect_violation "SQL in scheduling/" "coordinator/scheduling/heartbeats.cc holds SQL"

copy_tree
echo '#include <sqlite3.h>' >>"$work/tree/coordinator/api/http_server.cc"
expect_violation "sqlite3 in api/" "coordinator/api/http_server.cc holds SQL"

# Links: a minimal project whose store library links its api library.
project="$work/project"
mkdir -p "$project/cmake" "$project/coordinator/store" "$project/coordinator/api"
cp "$src/cmake/XmodLayers.cmake" "$project/cmake/"
cat >"$project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(layers LANGUAGES NONE)
add_library(store INTERFACE)
add_library(api INTERFACE)
add_subdirectory(coordinator/store)
add_subdirectory(coordinator/api)
include(cmake/XmodLayers.cmake)
_xmod_check_target_links()
CMAKE
echo 'add_library(store_lib INTERFACE)
target_link_libraries(store_lib INTERFACE api_lib)' >"$project/coordinator/store/CMakeLists.txt"
echo 'add_library(api_lib INTERFACE)' >"$project/coordinator/api/CMakeLists.txt"
if cmake -S "$project" -B "$work/project-build" >"$work/out" 2>&1; then
  fail "store/ linking api/: configure passed"
fi
grep -qF "store_lib" "$work/out" && grep -qF "links api_lib" "$work/out" ||
  { cat "$work/out" >&2; fail "store/ linking api/: the error does not name the link"; }
echo "ok: store/ linking api/"
echo "PASS"
