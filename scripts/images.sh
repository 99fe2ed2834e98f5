#!/usr/bin/env bash
# Builds xmod's container images with buildah, without a registry (docs/operations.md,
# "Container images"):
#   base        localhost/xmod-base:12, Debian 12 made by mmdebstrap from Debian's packages
#               (minbase, without manuals, documentation and translations); made again when
#               the one in storage is a day old
#   cpu         localhost/xmod:cpu   (deploy/docker/Dockerfile --target cpu)
#   cuda        localhost/xmod:cuda  (--target cuda: the GPU build's xmod-train)
#   prometheus  localhost/xmod-prometheus:latest, from Debian's prometheus package
#               (deploy/prometheus/Dockerfile)
# From this machine's builds by default: deploy/docker/stage.sh lays out what cpu and cuda hold
# from BUILD_DIR (default build/release) and GPU_BUILD_DIR (default build/gpu, made by
# scripts/build-gpu.sh), and the Dockerfile's `prebuilt` stage copies it; nothing is compiled.
# --from-source compiles inside the build instead (the Dockerfile's `source` stages, with a
# ccache that buildah keeps between builds). Prints each image's size and build time.
#
#   scripts/images.sh [--from-source] [cpu] [cuda] [prometheus]   # default: cpu prometheus
#
# Podman's storage is whatever containers-storage.conf says (CONTAINERS_STORAGE_CONF; the
# test puts its own under the build folder); CONTAINERS_CONF defaults to
# deploy/docker/containers.conf. Needs buildah, podman and mmdebstrap (scripts/setup.sh) and
# root, or a rootless podman set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/deploy/docker/containers.conf}
BUILD_DIR=$(realpath -m "${BUILD_DIR:-build/release}")
GPU_BUILD_DIR=$(realpath -m "${GPU_BUILD_DIR:-build/gpu}")
BASE=localhost/xmod-base:12
from_source=0
images=()
for arg in "$@"; do
  case $arg in
    --from-source) from_source=1 ;;
    cpu | cuda | prometheus) images+=("$arg") ;;
    *) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
  esac
done
((${#images[@]})) || images=(cpu prometheus)
for tool in buildah podman mmdebstrap; do
  if ! command -v "$tool" >/dev/null; then
    echo "images: no $tool (scripts/setup.sh installs it)" >&2
    exit 1
  fi
done
work=$BUILD_DIR/images
mkdir -p "$work"
# The builds' apt-get and pip reach the mirrors as this machine does: a bridge network's
# containers may not reach its resolver (CI's do not).
build=(buildah build --quiet --network host --build-arg "BASE=$BASE")

# report NAME SECONDS: the image's size as podman counts it (uncompressed) and its build time.
report() {
  local bytes
  bytes=$(podman image inspect --format '{{.Size}}' "$1")
  echo "images: $1: $((bytes / 1000000)) MB, built in $2 s"
}

# --- the base --------------------------------------------------------------------------------
made=$(podman image inspect --format '{{.Created.Unix}}' "$BASE" 2>/dev/null || echo 0)
if (($(date +%s) - made > 86400)); then
  start=$SECONDS
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$work/base.tar"
  podman import --quiet --change 'LABEL io.xmod.image=true' "$work/base.tar" "$BASE" >/dev/null
  rm -f "$work/base.tar"
  report "$BASE" $((SECONDS - start))
else
  echo "images: $BASE: reused (made $(date -d "@$made" '+%F %T'))"
fi

# --- the images --------------------------------------------------------------------------------
for image in "${images[@]}"; do
  start=$SECONDS
  if [[ $image == prometheus ]]; then
    name=localhost/xmod-prometheus:latest
    "${build[@]}" -t "$name" deploy/prometheus >/dev/null
  elif ((from_source)); then
    name=localhost/xmod:$image
    # BINARIES given although it is the default: buildah 1.28 skips the stages a FROM names
    # through an argument's default value as unused.
    "${build[@]}" --build-arg BINARIES=source --target "$image" -t "$name" \
      -f deploy/docker/Dockerfile . >/dev/null
  else
    name=localhost/xmod:$image
    packages=$work/base-packages
    podman run --rm --network none "$BASE" dpkg-query -W -f '${Package}\n' >"$packages"
    BUILD_DIR=$BUILD_DIR GPU_BUILD_DIR=$GPU_BUILD_DIR \
      deploy/docker/stage.sh "$image" "$work/$image/stage" "$packages"
    "${build[@]}" --build-arg BINARIES=prebuilt --target "$image" -t "$name" \
      -f deploy/docker/Dockerfile "$work/$image" >/dev/null
    rm -rf "${work:?}/$image"
  fi
  report "$name" $((SECONDS - start))
done
# The images these replaced (each image built on the base carries its label), untagged now.
podman image prune --force --filter label=io.xmod.image=true >/dev/null
