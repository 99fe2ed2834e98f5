# shellcheck shell=bash
# Shell helpers for the container tests (tests/deploy/images_test.sh, containers_test.sh).
# Source it; it needs XMOD_BIN_DIR and XMOD_SOURCE_DIR. Points podman and buildah at a storage
# of the build's own, BUILD_DIR/containers (images, containers, volumes: `rm -rf` wipes it),
# configured by deploy/docker/containers.conf, and sets SRC, BIN and BUILD. Fails, saying why,
# when podman cannot run here, except for one missing kernel feature, overlayfs
# (CONFIG_OVERLAY_FS), where it exits 77 (ctest: skipped) naming it.
set -euo pipefail
SRC=$(cd "${XMOD_SOURCE_DIR:?}" && pwd)
BIN=$(cd "${XMOD_BIN_DIR:?}" && pwd)
BUILD=$(dirname "$BIN")

podman_fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] ||
  podman_fail "the container tests run podman as root (bridge networks, published ports);" \
    "this is uid $(id -u)"
for tool in podman buildah podman-compose mmdebstrap runc netavark; do
  command -v "$tool" >/dev/null || [[ -x /usr/lib/podman/$tool ]] ||
    podman_fail "no $tool: scripts/setup.sh installs it"
done
if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
  echo "SKIP: the kernel has no overlay file system (CONFIG_OVERLAY_FS), podman's storage"
  exit 77
fi

export CONTAINERS_CONF=$SRC/deploy/docker/containers.conf
export CONTAINERS_STORAGE_CONF=$BUILD/containers/storage.conf
mkdir -p "$BUILD/containers"
# The run root holds sockets, whose paths must stay short: under /tmp, one per build folder.
cat >"$CONTAINERS_STORAGE_CONF" <<CONF
[storage]
driver = "overlay"
graphroot = "$BUILD/containers/storage"
runroot = "/tmp/xmod-podman-$(echo "$BUILD" | md5sum | head -c 8)"
CONF
