#!/usr/bin/env bash
# Configures and builds xmod into BUILD_DIR (default build/release) with Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so clones in other folders share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
BUILD_DIR=${BUILD_DIR:-build/release}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS"
