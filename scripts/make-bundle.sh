#!/usr/bin/env bash
# The service bundle: xmod-coordinator, xmod-worker and xmodctl with every shared library they
# load but the base runtime every Debian or Ubuntu machine has (glibc, libgcc, libstdc++, zlib,
# xz, zstd, bzip2, libcrypt), and the dashboard's files, in one relocatable tar.xz. It is what
# `scripts/gpu-check.sh --e2e` carries to a GPU machine that has none of xmod's C++ packages
# (docs/gpu-training.md, "The whole service on a GPU machine"). No LibTorch inside: the trainer
# is built there against the machine's own torch.
#
#   scripts/make-bundle.sh [--bin-dir DIR] [--out FILE]
#   scripts/make-bundle.sh --verify DIR   # an unpacked bundle (DIR/xmod-service) loads only
#                                         # its own libraries and the base runtime
#
# --bin-dir: the binaries to bundle (default build/release/bin, built first by scripts/build.sh
# when xmod-coordinator is missing there); --out: default .cache/xmod-bundle.tar.xz.
#
# Layout, relative to wherever it is unpacked:
#   bin/NAME       a launcher: runs libexec/NAME with lib/ first on the library path
#   libexec/NAME   the binary, stripped of its debug information
#   lib/           the shared libraries ldd resolved outside the base runtime
#   share/xmod/dashboard/   the dashboard's static files (xmod-coordinator --dashboard_dir)
#   BUNDLE         what was bundled: the commit, the libraries and their packages
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN_DIR=build/release/bin
OUT=.cache/xmod-bundle.tar.xz
VERIFY=""
while (($#)); do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --verify) VERIFY=$2; shift 2 ;;
    *) echo "make-bundle: unknown argument $1" >&2; exit 2 ;;
  esac
done
BINARIES=(xmod-coordinator xmod-worker xmodctl)
# Package names whose libraries stay the machine's own (what check-isolation.py calls the base
# runtime).
BASE_RUNTIME='^(libc6|libgcc-s1|libstdc\+\+6|zlib1g|liblzma5|libzstd1|libbz2-1\.0|libcrypt1)(:[a-z0-9]+)?$'

# package_of PATH: the Debian package that installed PATH (or its link target), else "".
package_of() {
  local found
  found=$(dpkg -S "$(readlink -f "$1")" 2>/dev/null || dpkg -S "$1" 2>/dev/null || true)
  echo "${found%%: *}" | head -1
}

if [[ -n "$VERIFY" ]]; then
  # Every library the bundled binaries load, with the bundle's lib/ first as its launchers
  # put it: from lib/, or of the base runtime. A library found nowhere, or only among the
  # machine's other packages, would be missing on a machine without them.
  dir=$(readlink -f "$VERIFY")/xmod-service
  leaks=0
  while read -r name path; do
    [[ "$path" == "$dir/lib/"* ]] && continue
    package=""
    [[ "$path" == /* ]] && package=$(package_of "$path")
    if [[ ! "$package" =~ $BASE_RUNTIME ]]; then
      echo "make-bundle: $name resolves to $path (${package:-no package}), not the bundle" >&2
      leaks=$((leaks + 1))
    fi
  done < <(LD_LIBRARY_PATH="$dir/lib" ldd "$dir"/libexec/* |
           awk '/=>/ {print $1, ($3 == "not" ? "not-found" : $3)}' | sort -u)
  ((leaks == 0)) || exit 1
  echo "make-bundle: $dir loads only its own libraries and the base runtime"
  exit 0
fi

if [[ ! -x "$BIN_DIR/xmod-coordinator" ]]; then
  scripts/build.sh >/dev/null
fi
for b in "${BINARIES[@]}"; do
  [[ -x "$BIN_DIR/$b" ]] || { echo "make-bundle: no $BIN_DIR/$b" >&2; exit 1; }
done

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
DEST=$STAGE/xmod-service
mkdir -p "$DEST"/{bin,libexec,lib,share/xmod}
cp -r dashboard/static "$DEST/share/xmod/dashboard"

# Every library the binaries load, by the path ldd resolved; the base runtime's stay out.
declare -A copied=()
manifest=()
for b in "${BINARIES[@]}"; do
  objcopy --strip-debug "$BIN_DIR/$b" "$DEST/libexec/$b"
  cat >"$DEST/bin/$b" <<'EOF'
#!/bin/sh
# Runs the bundled binary with the bundle's libraries first (scripts/make-bundle.sh).
here=$(dirname "$(readlink -f "$0")")
name=$(basename "$0")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/$name" "$@"
EOF
  chmod +x "$DEST/bin/$b"
  while read -r path; do
    [[ -n "${copied[$path]:-}" ]] && continue
    copied[$path]=1
    package=$(package_of "$path")
    if [[ "$package" =~ $BASE_RUNTIME ]]; then continue; fi
    objcopy --strip-debug "$(readlink -f "$path")" "$DEST/lib/$(basename "$path")"
    manifest+=("$(basename "$path") ${package:-no-package}")
  done < <(ldd "$BIN_DIR/$b" | awk '/=> \// {print $3}')
done
{
  echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "binaries ${BINARIES[*]}"
  printf 'lib %s\n' "${manifest[@]}" | sort
} >"$DEST/BUNDLE"

mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -cf - xmod-service | xz -T0 -6 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "make-bundle: $OUT: $(du -k "$OUT" | cut -f1) KiB packed, $(du -sk "$DEST" | cut -f1) KiB unpacked, ${#manifest[@]} libraries"
