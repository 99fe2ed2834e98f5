#!/usr/bin/env bash
# Builds the images the container test runs, as a lab does (scripts/images.sh cpu prometheus:
# the mmdebstrap base, localhost/xmod:cpu from this build, localhost/xmod-prometheus from
# Debian's package), into the build's own podman storage (tests/lib/podman.sh), and checks
# them:
#   - the cpu image runs as the user xmod (uid 10001), not root;
#   - every binary in it answers --version, and ldd finds every library of every binary and of
#     every LibTorch library in it (the libraries stage.sh chose are all they load);
#   - the prometheus image runs as nobody (65534) and answers --version.
# Prints each image's size and build time (images.sh) and its own wall time.
source "$(dirname "$0")/../lib/podman.sh"
start=$SECONDS
BUILD_DIR=$BUILD "$SRC/scripts/images.sh" cpu prometheus

check=$(podman run --rm --network none --entrypoint sh localhost/xmod:cpu -c '
  id -u
  for binary in /usr/local/bin/*; do "$binary" --version >/dev/null || echo "FAILED $binary"; done
  find /usr/local/bin /opt/torch -type f | xargs ldd 2>&1 | grep "not found" || true')
[[ $(head -n 1 <<<"$check") == 10001 ]] || podman_fail "xmod:cpu runs as uid $(head -n 1 <<<"$check")"
[[ $(tail -n +2 <<<"$check") == "" ]] || podman_fail "in xmod:cpu: $(tail -n +2 <<<"$check")"
binaries=$(podman run --rm --network none --entrypoint ls localhost/xmod:cpu /usr/local/bin | paste -sd ' ')
user=$(podman image inspect --format '{{.Config.User}}' localhost/xmod-prometheus:latest)
[[ $user == 65534:65534 ]] || podman_fail "xmod-prometheus runs as \"$user\", not nobody"
podman run --rm --network none localhost/xmod-prometheus:latest --version 2>&1 | head -n 1
echo "images_test: PASS: xmod:cpu runs as uid 10001; $binaries answer --version;" \
  "ldd finds every library; in $((SECONDS - start)) s"
