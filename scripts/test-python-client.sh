#!/usr/bin/env bash
# Tests the Python client (clients/python) against a real cluster:
#
#   scripts/test-python-client.sh BUILD_DIR [PYTEST_ARGS...]
#
# Creates (or reuses) a venv under .cache/pyclient-venv with Debian's /usr/bin/python3,
# installs the client into it with `pip install ./clients/python pytest` (again only when
# the client's sources or the protos changed), then starts an xmod-coordinator with
# credentials and two xmod-workers from BUILD_DIR/bin on loopback (tests/lib/cluster.sh)
# whose trainer is clients/python/tests/fake_trainer.py (a run takes well under a second),
# and runs pytest over clients/python/tests: the unit tests and the cluster tests. Every
# process it starts is stopped on exit; KEEP_TMP=1 keeps their logs. ctest runs it as
# python_client_test.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "$1" && pwd)
shift
VENV=$SRC/.cache/pyclient-venv
for bin in xmod-coordinator xmod-worker xmodctl; do
  [[ -x $BUILD_DIR/bin/$bin ]] || { echo "FAIL: $BUILD_DIR/bin/$bin not built" >&2; exit 1; }
done

# The venv, and the client in it. One installer at a time (pip builds in clients/python).
mkdir -p "$SRC/.cache"
exec 9>"$SRC/.cache/pyclient-venv.lock"
flock 9
if [[ ! -x $VENV/bin/python ]]; then
  /usr/bin/python3 -m venv "$VENV" || {
    echo "FAIL: /usr/bin/python3 -m venv failed; install python3-venv (scripts/setup.sh)" >&2
    exit 1
  }
fi
stamp=$(cd "$SRC" && find clients/python/pyproject.toml clients/python/setup.py \
          clients/python/src proto/xmod/v1 -type f \( -name '*.py' -o -name '*.toml' \
          -o -name '*.proto' \) ! -name '*_pb2*' | LC_ALL=C sort | xargs sha256sum | sha256sum)
if [[ ! -f $VENV/.xmod-stamp || $(<"$VENV/.xmod-stamp") != "$stamp" ]]; then
  echo "python client: pip install ./clients/python pytest"
  (cd "$SRC" && "$VENV/bin/pip" install -q --disable-pip-version-check ./clients/python pytest)
  echo "$stamp" >"$VENV/.xmod-stamp"
fi
flock -u 9

export XMOD_BIN_DIR=$BUILD_DIR/bin
source "$SRC/tests/lib/cluster.sh"
trainer=$TEST_TMP/fake-trainer
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$VENV/bin/python" \
  "$SRC/clients/python/tests/fake_trainer.py" >"$trainer"
chmod +x "$trainer"
use_credentials w1 w2
start_coordinator
start_worker w1 --train_bin="$trainer"
start_worker w2 --train_bin="$trainer"
export READ_TOKEN_FILE OTHER_TOKEN_FILE ADMIN_TOKEN_FILE XMOD_HTTP_ADDR="127.0.0.1:$COORD_HTTP" \
  XMOD_PYCLIENT_CLUSTER=1
cd "$SRC/clients/python"
status=0
"$VENV/bin/python" -m pytest -p no:cacheprovider "$@" tests || status=$?
if ((status != 0)); then
  echo "--- coordinator log (last 30 lines) ---" >&2
  tail -n 30 "$TEST_TMP/coordinator.log" >&2 || true
fi
exit $status
