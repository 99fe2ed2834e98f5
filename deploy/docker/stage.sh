#!/usr/bin/env bash
# Lays out the files of one xmod image under DEST, as they go into it (deploy/docker/Dockerfile
# copies DEST onto its base image's /):
#   cpu   /usr/local/bin: every xmod binary of BUILD_DIR (default build/release) —
#         xmod-coordinator, xmod-worker, xmod-train, xmodctl, xmod-eval, xmod-data, xmod-fit,
#         xmod-design-sim;
#         the dashboard's files in /usr/local/share/xmod/dashboard
#   cuda  /usr/local/bin: xmod-worker of BUILD_DIR and xmod-train of GPU_BUILD_DIR (default
#         build/gpu: CUDA and NCCL, scripts/build-gpu.sh)
# and only the shared libraries those binaries load (ldd) that the base image's packages do not
# hold:
#   - LibTorch's, from the PyPI wheel (.cache/torch-venv, scripts/install-libtorch.sh), under
#     /opt/torch in the wheel's own layout (torch/lib, nvidia/*/lib), so that their $ORIGIN run
#     paths find each other; /etc/ld.so.conf.d/xmod-torch.conf names those folders for the
#     binaries (the Dockerfile runs ldconfig). LibTorch's own libraries lose their symbol
#     tables (strip --strip-unneeded; the dynamic symbols stay): -91 MB for libtorch_cpu,
#     -80 MB for libtorch_cuda. NVIDIA's are copied as the wheels ship them. The cuda image
#     also gets what the CUDA libraries open at run time, which ldd cannot see: cuDNN's engines
#     (libcudnn_*.so.9, opened by libcudnn.so.9), NVRTC's builtins and LibTorch's NVRTC shim
#     (libcaffe2_nvrtc.so). Not copied: libtorch_cuda_linalg.so (torch.linalg's cuSOLVER
#     decompositions, which xmod never calls) and the wheel's Python, headers and archives;
#   - Debian's, from this machine (Debian 12, as the base), into /usr/lib/x86_64-linux-gnu;
# plus the data files those libraries read: gRPC's root certificates (libgrpc29) and, with
# xmodctl, fontconfig's configuration and the DejaVu fonts (xmodctl report's text).
#
#   deploy/docker/stage.sh cpu|cuda DEST BASE_PACKAGES
#
# BASE_PACKAGES: a file naming the base image's Debian packages, one a line; no file of theirs
# is copied. Fails, naming it, when a binary or library needs a library ldd cannot find (but
# the driver's libcuda.so.1).
set -euo pipefail
if [[ $# -ne 3 || ! $1 =~ ^(cpu|cuda)$ ]]; then
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
kind=$1
dest=$2
base_packages=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${BUILD_DIR:-$root/build/release}
gpu_build_dir=${GPU_BUILD_DIR:-$root/build/gpu}
site=$(cd "$root/.cache/torch-venv/lib/python3."*/site-packages && pwd -P)
fail() {
  echo "stage.sh: $*" >&2
  exit 1
}

if [[ $kind == cpu ]]; then
  binaries=("$build_dir"/bin/{xmod-coordinator,xmod-worker,xmod-train,xmodctl,xmod-eval}
            "$build_dir"/bin/{xmod-data,xmod-fit,xmod-design-sim})
  data_packages=(libgrpc29 fontconfig-config fonts-dejavu-core)
  dlopened=()
else
  binaries=("$build_dir/bin/xmod-worker" "$gpu_build_dir/bin/xmod-train")
  data_packages=(libgrpc29)
  dlopened=("$site"/nvidia/cudnn/lib/libcudnn_*.so.9 "$site"/nvidia/cu*/lib/libnvrtc-builtins.so.*
            "$site/torch/lib/libcaffe2_nvrtc.so")
fi
for binary in "${binaries[@]}"; do [[ -x $binary ]] || fail "$binary is not built"; done
[[ $dest != / ]] || fail "DEST is /"
rm -rf "$dest"
mkdir -p "$dest/usr/local/bin" "$dest/usr/lib/x86_64-linux-gnu" "$dest/etc/ld.so.conf.d"
cp "${binaries[@]}" "$dest/usr/local/bin/"
strip --strip-unneeded "$dest"/usr/local/bin/*

# Every library the binaries and the dlopened libraries load, as ldd resolves it, its folder
# resolved (the wheel's libraries name each other through ../../nvidia and .cache's links).
# The driver's libcuda.so.1 (libcaffe2_nvrtc.so's) is in no image: the NVIDIA container
# runtime mounts it on GPU nodes.
found=$(for file in "${binaries[@]}" "${dlopened[@]}"; do ldd "$file" | sed "s#^#$file: #"; done)
missing=$(grep "=> not found" <<<"$found" | grep -v "[[:space:]]libcuda\.so\.1 =>" || true)
[[ -z $missing ]] || fail "ldd finds no file for:"$'\n'"$missing"
mapfile -t libraries < <(awk '$3 == "=>" && $4 ~ /^\// {print $4}' <<<"$found" |
  while read -r path; do echo "$(cd "${path%/*}" && pwd -P)/${path##*/}"; done | sort -u)

# Debian's libraries and their packages. dpkg knows a library by one of its two paths (merged
# /usr: /lib is /usr/lib), so both are asked; those of the base image's packages stay out.
declare -A owner
while read -r package path; do
  owner[${path#/usr}]=$package
done < <(printf '%s\n' "${libraries[@]}" | grep -v "^$site/" | sed 's#^/usr/lib/#/lib/#' |
  sed 'p; s#^#/usr#' | xargs dpkg-query -S 2>/dev/null |
  sed -n 's#^\([^:,]*\)[^ ]* \(/.*\)$#\1 \2#p')
torch_dirs=()
for library in "${libraries[@]}" "${dlopened[@]}"; do
  if [[ $library == "$site"/* ]]; then
    relative=${library#"$site"/}
    mkdir -p "$dest/opt/torch/$(dirname "$relative")"
    if [[ $relative == torch/lib/* ]]; then
      cp -L "$library" "$dest/opt/torch/$relative"
      strip --strip-unneeded "$dest/opt/torch/$relative"
    else  # NVIDIA's, as shipped: a hard link where the build shares the wheel's file system
      cp -lL "$library" "$dest/opt/torch/$relative" 2>/dev/null ||
        cp -L "$library" "$dest/opt/torch/$relative"
    fi
    torch_dirs+=("/opt/torch/$(dirname "$relative")")
    continue
  fi
  package=${owner[${library#/usr}]:-}
  [[ -n $package ]] || fail "$library belongs to no Debian package"
  grep -qx "$package" "$base_packages" && continue
  cp -L "$library" "$dest/usr/lib/x86_64-linux-gnu/"
done
printf '%s\n' "${torch_dirs[@]}" | sort -u >"$dest/etc/ld.so.conf.d/xmod-torch.conf"

# Files the libraries read, from their packages (no documentation).
for package in "${data_packages[@]}"; do
  dpkg-query -L "$package" | while read -r path; do
    if [[ (-f $path || -L $path) && $path != /usr/share/doc/* && $path != *.so* ]]; then
      echo "${path#/}"
    fi
  done
done | tar -C / -cf - --files-from=- | tar -C "$dest" -xf -
if [[ $kind == cpu ]]; then
  mkdir -p "$dest/usr/local/share/xmod"
  cp -r "$root/dashboard/static" "$dest/usr/local/share/xmod/dashboard"
fi
echo "stage.sh: $kind: $(du -sh "$dest" | cut -f1) in $dest (${binaries[*]##*/})"
