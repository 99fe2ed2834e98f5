#!/usr/bin/env bash
# Builds container images as a lab does (scripts/images.sh, docs/operations.md, "Container
# images") into the build's own podman storage (tests/lib/podman.sh) and checks them:
#   images_test.sh        the mmdebstrap base, localhost/xmod:cpu from this build and
#                         localhost/xmod-prometheus from Debian's package (ctest: deploy_images,
#                         the images deploy_containers runs)
#   images_test.sh cuda   localhost/xmod:cuda from this build and GPU_BUILD_DIR (default
#                         build/gpu, scripts/build-gpu.sh): built, checked, not trained on (no
#                         GPU needed), then removed (3.6 GB; .ci/run)
# Each xmod image runs as the user xmod (uid 10001), every binary in it answers --version, and
# ldd finds every library of every binary and every LibTorch library in it, but the driver's
# libcuda.so.1 (the NVIDIA container runtime adds it on GPU nodes); Prometheus runs as nobody
# and answers --version. Prints each image's size and build time (images.sh) and its wall time.
source "$(dirname "$0")/../lib/podman.sh"
start=$SECONDS
case ${1:-cpu} in
  cpu) images=(cpu prometheus) ;;
  cuda) images=(cuda) ;;
  *) echo "usage: $0 [cuda]" >&2; exit 2 ;;
esac
BUILD_DIR=$BUILD "$SRC/scripts/images.sh" "${images[@]}"

# check_xmod IMAGE: prints the binaries it checked.
check_xmod() {
  local out
  out=$(podman run --rm --network none --entrypoint sh "$1" -c '
    id -u
    for binary in /usr/local/bin/*; do "$binary" --version >/dev/null || echo "FAILED $binary"; done
    find /usr/local/bin /opt/torch -type f | xargs ldd 2>&1 | grep "not found" |
      grep -v "libcuda.so.1 " || true')
  [[ $(head -n 1 <<<"$out") == 10001 ]] || podman_fail "$1 runs as uid $(head -n 1 <<<"$out")"
  [[ $(tail -n +2 <<<"$out") == "" ]] || podman_fail "in $1: $(tail -n +2 <<<"$out")"
  podman run --rm --network none --entrypoint ls "$1" /usr/local/bin | paste -sd ' '
}
for image in "${images[@]}"; do
  if [[ $image == prometheus ]]; then
    user=$(podman image inspect --format '{{.Config.User}}' localhost/xmod-prometheus:latest)
    [[ $user == 65534:65534 ]] || podman_fail "xmod-prometheus runs as \"$user\", not nobody"
    podman run --rm --network none localhost/xmod-prometheus:latest --version 2>&1 | head -n 1
  else
    echo "images_test: xmod:$image runs as uid 10001; $(check_xmod "localhost/xmod:$image")" \
      "answer --version; ldd finds every library"
  fi
done
[[ ${1:-} != cuda ]] || podman rmi localhost/xmod:cuda >/dev/null
echo "images_test: PASS in $((SECONDS - start)) s"
