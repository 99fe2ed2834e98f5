#!/usr/bin/env bash
# The test command of the README: installs what is missing, builds everything and runs the
# whole suite with ctest (unit, integration, deploy and browser tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
start=$(date +%s)
BUILD_DIR=${BUILD_DIR:-build/release} scripts/build.sh
echo "build: $(( $(date +%s) - start )) s"
cd "${BUILD_DIR:-build/release}"
ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-2}"
