#!/usr/bin/env bash
# Checks the operator files against the real tools: promtool validates deploy/prometheus
# and lints what the coordinator and a worker (with GPU telemetry from a stand-in NVML) export,
# then a real Prometheus scrapes a real coordinator and worker on loopback and every
# Grafana panel's PromQL is evaluated against it: each must parse, and every metric it
# names must exist in what xmod exports.
source "$(dirname "$0")/../lib/cluster.sh"
SRC=${XMOD_SOURCE_DIR:?}

# Syntax only: the TLS and token files it names are made by prometheus_tls_test.sh, which
# runs this configuration.
promtool check config --syntax-only "$SRC/deploy/prometheus/prometheus.yml"
promtool check rules "$SRC/deploy/prometheus/xmod_rules.yml"

start_coordinator
# The worker's GPU telemetry from a stand-in NVML (worker/fake_nvml.cc) reporting two GPUs, so
# that the GPU panels' series exist and pass the same checks as every other.
cat >"$TEST_TMP/nvml_state" <<STATE
gpu 0 75 51539607552 150754820096 412000 58 NVIDIA H200
gpu 1 0 0 150754820096 - 33 NVIDIA H200
STATE
FAKE_NVML_STATE="$TEST_TMP/nvml_state" start_worker w1 --nvml_library="${XMOD_FAKE_NVML:?}" \
  --gpu_sample_ms=200
# Both exporters pass promtool's lint (names, units, help text, label conventions); the
# worker's answers once it has started (bounded wait).
deadline=$((SECONDS + 30))
until curl -sf "http://127.0.0.1:$WORKER_METRICS/metrics" >/dev/null; do
  if ((SECONDS > deadline)); then
    echo "FAIL: worker w1 never served /metrics; its log:" >&2
    tail -n 20 "$TEST_TMP/w1.log" >&2
    exit 1
  fi
  sleep 0.2
done
for port in "$COORD_METRICS" "$WORKER_METRICS"; do
  curl -sf "http://127.0.0.1:$port/metrics" | promtool check metrics
done
PROM_PORT=$(free_port)
cat >"$TEST_TMP/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: xmod-coordinator
    static_configs: [{targets: ["127.0.0.1:$COORD_METRICS"]}]
  - job_name: xmod-worker
    static_configs: [{targets: ["127.0.0.1:$WORKER_METRICS"]}]
YAML
prometheus --config.file="$TEST_TMP/prometheus.yml" --storage.tsdb.path="$TEST_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$TEST_TMP/prometheus.log" 2>&1 &
PIDS+=($!)

/usr/bin/python3 - "$PROM_PORT" "$SRC/dashboard/grafana/dashboards" <<'PY'
import glob, json, re, sys, time, urllib.parse, urllib.request

port, dash_dir = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}/api/v1"

def get(path, **params):
    url = f"{base}/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)

deadline = time.time() + 60
while True:
    try:
        up = get("query", query="up")["data"]["result"]
        if len(up) == 2 and all(s["value"][1] == "1" for s in up):
            break
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit("prometheus never saw both xmod targets up")
    time.sleep(0.5)

PER_ACTIVE_RUN = {"xmod_run_flops_done", "xmod_run_train_loss"}


def check_panels():
    """(panel queries evaluated, failures) against what Prometheus has scraped so far."""
    names = set(get("label/__name__/values")["data"])
    failures = []
    panels = 0
    for path in sorted(glob.glob(f"{dash_dir}/*.json")):
        for panel in json.load(open(path))["panels"]:
            for target in panel.get("targets", []):
                panels += 1
                expr = target["expr"]
                result = get("query", query=expr)
                if result.get("status") != "success":
                    failures.append(f"{panel['title']}: {expr}: {result}")
                    continue
                for metric in re.findall(r"\b(xmod_[a-z0-9_]+)", expr):
                    # Per-run families exist only while a run is active (bounded label set);
                    # the end-to-end dashboard test checks them during a real sweep.
                    if metric in PER_ACTIVE_RUN:
                        continue
                    if metric not in names:
                        failures.append(f"{panel['title']}: metric {metric} is not exported")
    return panels, failures


# A series first exported after the first scrape shows up at a later one: look again until
# every panel passes (bounded).
deadline = time.time() + 30
panels, failures = check_panels()
while failures and time.time() < deadline:
    time.sleep(1)
    panels, failures = check_panels()
if failures:
    sys.exit("\n".join(failures))
print(f"{panels} Grafana panel queries evaluated against Prometheus; all metrics exist")
PY
