#!/usr/bin/env bash
# The main job of the README: installs what is missing, builds, starts a local coordinator
# and two workers on loopback, runs the demo sweep on the bundled dict-gcide corpus on CPU
# with live progress, and prints the results table read from the database.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build/release} scripts/build.sh
exec deploy/local/demo.sh "${BUILD_DIR:-build/release}" "$@"
