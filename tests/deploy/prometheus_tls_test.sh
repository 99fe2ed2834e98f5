#!/usr/bin/env bash
# The Prometheus endpoints behind TLS and a bearer token, scraped by the real Prometheus:
# a coordinator and a worker serve /metrics over HTTPS (certificates made here with openssl,
# as docs/security.md shows) and ask for a token (--metrics_token_file). Prometheus runs
# deploy/prometheus/prometheus.yml itself, with only its file paths and targets pointed at
# this machine (promtool checks it, files included, first), plus three jobs that must fail:
# no token, a wrong token (both 401) and plaintext to the HTTPS port. The two real jobs
# must be up and their xmod metrics stored.
source "$(dirname "$0")/../lib/cluster.sh"
SRC=${XMOD_SOURCE_DIR:?}
PROM=$TEST_TMP/prometheus
mkdir -p "$PROM"

# A CA, and a certificate for 127.0.0.1 that both daemons serve.
(
  cd "$PROM"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=xmod-test-ca -keyout ca.key -out ca.pem 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=xmod-metrics \
    -keyout server.key -out server.csr 2>/dev/null
  echo "subjectAltName=IP:127.0.0.1" >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -out server.pem -extfile server.ext 2>/dev/null
  umask 077
  head -c 24 /dev/urandom | base64 | tr -d '/+=' >metrics.token
)
METRICS_FLAGS=(--metrics_tls_cert="$PROM/server.pem" --metrics_tls_key="$PROM/server.key"
  --metrics_token_file="$PROM/metrics.token")
start_coordinator "${METRICS_FLAGS[@]}"
start_worker w1 "${METRICS_FLAGS[@]}"

# The shipped configuration, its files and targets on this machine.
sed -e "s#/etc/prometheus/xmod/#$PROM/#g" \
  -e "s#\"xmod-coordinator:9464\"#\"127.0.0.1:$COORD_METRICS\"#" \
  -e "s#\"gpu-node-1:9465\", \"gpu-node-2:9465\"#\"127.0.0.1:$WORKER_METRICS\"#" \
  -e "s#scrape_interval: 15s#scrape_interval: 1s#" \
  "$SRC/deploy/prometheus/prometheus.yml" >"$PROM/prometheus.yml"
cp "$SRC/deploy/prometheus/xmod_rules.yml" "$PROM/"
if grep -q "/etc/prometheus\|gpu-node\|xmod-coordinator:9464" "$PROM/prometheus.yml"; then
  echo "deploy/prometheus/prometheus.yml changed shape: this test no longer rewrites it" >&2
  exit 1
fi
cat >>"$PROM/prometheus.yml" <<YAML
  - job_name: without-token
    scheme: https
    tls_config: {ca_file: $PROM/ca.pem}
    static_configs: [{targets: ["127.0.0.1:$COORD_METRICS", "127.0.0.1:$WORKER_METRICS"]}]
  - job_name: wrong-token
    scheme: https
    tls_config: {ca_file: $PROM/ca.pem}
    authorization: {credentials: not-the-metrics-token-0123456789}
    static_configs: [{targets: ["127.0.0.1:$COORD_METRICS"]}]
  - job_name: plaintext
    authorization: {credentials_file: $PROM/metrics.token}
    static_configs: [{targets: ["127.0.0.1:$COORD_METRICS"]}]
YAML
promtool check config "$PROM/prometheus.yml"

PROM_PORT=$(free_port)
prometheus --config.file="$PROM/prometheus.yml" --storage.tsdb.path="$TEST_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$TEST_TMP/prometheus.log" 2>&1 &
PIDS+=($!)

/usr/bin/python3 - "$PROM_PORT" <<'PY'
import json, sys, time, urllib.parse, urllib.request

base = f"http://127.0.0.1:{sys.argv[1]}/api/v1"

def get(path, **params):
    with urllib.request.urlopen(f"{base}/{path}?{urllib.parse.urlencode(params)}",
                                timeout=5) as r:
        return json.load(r)["data"]

# Every target scraped at least once: the real ones up, the others down with their error.
EXPECTED = {"xmod-coordinator": 1, "xmod-worker": 1, "without-token": 2, "wrong-token": 1,
            "plaintext": 1}
deadline = time.time() + 60
while True:
    try:
        targets = get("targets", state="active")["activeTargets"]
        jobs = {}
        for t in targets:
            jobs.setdefault(t["labels"]["job"], []).append(t)
        settled = all(len(jobs.get(job, [])) == n for job, n in EXPECTED.items()) and all(
            t["health"] == ("up" if t["labels"]["job"].startswith("xmod-") else "down")
            for t in targets)
        if settled:
            break
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit(f"targets never settled: {json.dumps(get('targets')['activeTargets'])}")
    time.sleep(0.5)

failures = []
for t in targets:
    job, error = t["labels"]["job"], t["lastError"]
    if job in ("without-token", "wrong-token") and "401" not in error:
        failures.append(f"{job} {t['scrapeUrl']}: expected a 401, got {error!r}")
    if job == "plaintext" and not error:
        failures.append(f"plaintext {t['scrapeUrl']}: scraped without TLS")
for job in ("xmod-coordinator", "xmod-worker"):
    if get("query", query=f'up{{job="{job}"}} == 1')["result"] == []:
        failures.append(f"{job}: up is not 1")
    if get("query", query=f'xmod_build_info{{job="{job}"}}')["result"] == []:
        failures.append(f"{job}: xmod_build_info was not stored")
if get("query", query='xmod_metric_points_ingested_total{job="xmod-coordinator"}')["result"] == []:
    failures.append("xmod-coordinator: xmod_metric_points_ingested_total was not stored")
if failures:
    sys.exit("\n".join(failures))
print("Prometheus scraped the coordinator and the worker over HTTPS with the bearer token;"
      " without it, with a wrong one and over plaintext it was refused")
PY
