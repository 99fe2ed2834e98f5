#!/usr/bin/env bash
# Checks the operator files against the real tools: promtool validates deploy/prometheus
# and lints what the coordinator and a worker export, then a real Prometheus scrapes a real coordinator and worker on loopback and every
# Grafana panel's PromQL is evaluated against it: each must parse, and every metric it
# names must exist in what xmod exports.
source "$(dirname "$0")/../lib/cluster.sh"
SRC=${XMOD_SOURCE_DIR:?}

# Syntax only: the TLS and token files it names are made by prometheus_tls_test.sh, which
# runs this configuration.
promtool check config --syntax-only "$SRC/deploy/prometheus/prometheus.yml"
promtool check rules "$SRC/deploy/prometheus/xmod_rules.yml"

start_coordinator
start_worker w1
# Both exporters pass promtool's lint (names, units, help text, label conventions).
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
time.sleep(4)  # a few scrapes, so rate() has two samples

names = set(get("label/__name__/values")["data"])
PER_ACTIVE_RUN = {"xmod_run_flops_done", "xmod_run_train_loss"}
keywords = {"sum", "by", "rate", "increase", "histogram_quantile", "le", "on", "and", "or",
            "state", "method", "code", "instance", "max", "min", "avg"}
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
if failures:
    sys.exit("\n".join(failures))
print(f"{panels} Grafana panel queries evaluated against Prometheus; all metrics exist")
PY
