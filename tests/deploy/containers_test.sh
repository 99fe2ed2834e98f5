#!/usr/bin/env bash
# The images a lab deploys, run as containers (docs/operations.md, "Container images"):
# deploy/docker/compose.yaml as it is, through podman-compose, on the images images_test.sh
# built (localhost/xmod:cpu, localhost/xmod-prometheus), in the build's own podman storage
# (tests/lib/podman.sh); every port published on 127.0.0.1 at a free port; credentials from
# files as compose.yaml describes. Checks:
#   - the coordinator's grpc.health.v1 service answers SERVING through its published port;
#   - xmodctl on this machine submits the demo sweep (examples/demo.textpb, on the demo
#     corpus in the `data` volume) and both worker containers train it;
#   - once a run has a checkpoint in the shared `checkpoints` volume, its worker's container is
#     killed (SIGKILL: worker and trainer): that attempt ends lost, the run resumes from the
#     checkpoint on the other worker's container (started again after that), and every run of
#     the sweep SUCCEEDS;
#   - the coordinator's /metrics (published port) counts the runs succeeded, the dashboard
#     answers, and the Prometheus container has scraped the coordinator and both workers;
#   - `podman kube play deploy/k8s/storage.yaml` makes its two claims as volumes (the kinds
#     of coordinator.yaml and worker.yaml are not ones podman 4.3 plays).
# Then the workers are stopped (they drain), then the rest; the containers, volumes and network
# are removed. KEEP_TMP=1 keeps the logs. Prints its wall time.
source "$(dirname "$0")/../lib/podman.sh"
source "$SRC/tests/lib/cluster.sh"
PROBE=${XMOD_HEALTH_PROBE:?path of the grpc_health_probe test binary}
XMODCTL=$BIN/xmodctl
start=$SECONDS
project=xmodtest$$
compose() {
  podman-compose -p "$project" -f "$SRC/deploy/docker/compose.yaml" "$@" \
    >>"$TEST_TMP/compose.log" 2>&1
}
container() { echo "${project}_$1_1"; }

teardown() {
  set +e
  podman stop -t 30 "$(container worker-1)" "$(container worker-2)" >/dev/null 2>&1
  compose down -v -t 30
  podman volume rm -f "${project}_data" >/dev/null 2>&1
  podman network rm -f "${project}_default" >/dev/null 2>&1
  podman volume rm -f xmod-checkpoints xmod-data >/dev/null 2>&1
  cleanup
}
trap teardown EXIT
fail() {
  echo "FAIL: $*" >&2
  local name
  for name in coordinator worker-1 worker-2 prometheus; do
    echo "--- $(container "$name") (last 20 lines)" >&2
    podman logs --tail 20 "$(container "$name")" >&2 2>&1
  done
  echo "--- podman-compose (last 20 lines)" >&2
  tail -n 20 "$TEST_TMP/compose.log" >&2
  exit 1
}
query() { "$XMODCTL" -o csv query "$1" | tail -n +2; }

# --- the demo corpus, into the `data` volume -------------------------------------------------
corpus=$TEST_TMP/corpus
"$SRC/data/make_demo_corpus.sh" "$corpus" "$BIN" >"$TEST_TMP/corpus.log"
podman volume create "${project}_data" >/dev/null
(cd "$corpus" && tar -cf - gcide_train_*.bin gcide_val_*.bin) |
  podman volume import "${project}_data" -
echo "containers_test: demo corpus in volume ${project}_data after $((SECONDS - start)) s"

# --- compose up: the coordinator, two workers, Prometheus ----------------------------------
use_credentials worker-1 worker-2
chown 10001 "$TEST_TMP/credentials" "$TEST_TMP"/worker-{1,2}.token
export XMOD_SECRETS=$TEST_TMP XMOD_PUBLISH=127.0.0.1 XMOD_WORKER_CORES=1
XMOD_GRPC_PORT=$(free_port)
XMOD_HEALTH_PORT=$(free_port)
XMOD_HTTP_PORT=$(free_port)
XMOD_METRICS_PORT=$(free_port)
XMOD_PROMETHEUS_PORT=$(free_port)
export XMOD_GRPC_PORT XMOD_HEALTH_PORT XMOD_HTTP_PORT XMOD_METRICS_PORT XMOD_PROMETHEUS_PORT
export XMOD_ADDR=127.0.0.1:$XMOD_GRPC_PORT
compose up -d --no-build coordinator worker-1 worker-2 prometheus ||
  fail "podman-compose up"
serving() { [[ $("$PROBE" "127.0.0.1:$XMOD_HEALTH_PORT") == SERVING ]]; }
wait_until 60 "the coordinator's health service to answer SERVING on port $XMOD_HEALTH_PORT" serving
workers_up() { [[ $(query "SELECT COUNT(*) FROM workers") == 2 ]]; }
wait_until 60 "both workers to register" workers_up
echo "containers_test: coordinator SERVING (health, published port $XMOD_HEALTH_PORT), both" \
  "workers registered after $((SECONDS - start)) s"

# --- the demo sweep, and a worker killed mid-run ---------------------------------------------
sed 's#var/demo/corpus#/data#g' "$SRC/examples/demo.textpb" >"$TEST_TMP/demo.textpb"
sweep=$("$XMODCTL" -o json sweep submit "$TEST_TMP/demo.textpb" |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["sweep_id"])')
runs=$(query "SELECT COUNT(*) FROM runs WHERE sweep_id = $sweep")
submitted_at=$SECONDS
# A running attempt with exactly one checkpoint recorded (its first evaluation's, at 25% of
# the budget; the next comes at 50%): mid-way, with a resume point and well before its end.
pick_victim() {
  victim=$(query "SELECT a.run_id, a.worker FROM attempts a WHERE a.outcome = 'running'
                  AND (SELECT COUNT(*) FROM checkpoints c WHERE c.run_id = a.run_id
                       AND c.attempt = a.attempt) = 1
                  ORDER BY a.run_id LIMIT 1")
  [[ -n $victim ]]
}
wait_until 300 "a running attempt with a checkpoint" pick_victim
IFS=, read -r victim_run victim_worker <<<"$victim"
other_worker=worker-$((3 - ${victim_worker#worker-}))
checkpoint=$(query "SELECT path FROM checkpoints WHERE run_id = $victim_run ORDER BY step LIMIT 1")
echo "containers_test: run $victim_run has checkpoint $checkpoint;" \
  "killing $(container "$victim_worker")"
podman kill -s KILL "$(container "$victim_worker")" >/dev/null
podman wait "$(container "$victim_worker")" >/dev/null
# Its lease expires (30 s) and the run waits for the other worker, which only the shared
# volume gives the checkpoint; the killed container starts again once the run is there.
resumed() {
  [[ $(query "SELECT worker FROM attempts WHERE run_id = $victim_run AND attempt > 1") == \
     "$other_worker" ]]
}
wait_until 300 "run $victim_run to start again on $other_worker" resumed
podman start "$(container "$victim_worker")" >/dev/null

sweep_over() {
  [[ $(query "SELECT COUNT(*) FROM runs WHERE sweep_id = $sweep
              AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')") == 0 ]]
}
wait_until 900 "every run of sweep $sweep to end" sweep_over
sweep_s=$((SECONDS - submitted_at))
not_succeeded=$(query "SELECT id, state FROM runs WHERE sweep_id = $sweep AND state != 'SUCCEEDED'")
[[ -z $not_succeeded ]] || fail "runs that did not succeed: $not_succeeded"
attempts=$(query "SELECT attempt, worker, outcome, resumed_from_step FROM attempts
                  WHERE run_id = $victim_run ORDER BY attempt")
echo "containers_test: run $victim_run attempts (attempt,worker,outcome,resumed_from_step):"
sed 's/^/  /' <<<"$attempts"
IFS=, read -r _ first_worker first_outcome _ <<<"$(head -n 1 <<<"$attempts")"
[[ $first_worker == "$victim_worker" && $first_outcome == lost ]] ||
  fail "run $victim_run's first attempt should end lost on $victim_worker"
IFS=, read -r _ last_worker last_outcome last_resumed <<<"$(tail -n 1 <<<"$attempts")"
[[ $last_worker == "$other_worker" && $last_outcome == succeeded && $last_resumed -gt 0 ]] ||
  fail "run $victim_run should succeed on $other_worker, resumed from its checkpoint"
"$XMODCTL" query "SELECT s.name, round(s.final_val_loss, 4) AS final_val_loss, r.attempts,
                    lower(s.state) AS state
                  FROM run_summary s JOIN runs r ON r.id = s.run_id
                  WHERE s.sweep_id = $sweep ORDER BY s.run_id"
echo "containers_test: all $runs runs of the demo sweep SUCCEEDED in $sweep_s s"

# --- /metrics, the dashboard and Prometheus, through the published ports ----------------------
# The run-count gauges follow the database on the coordinator's tick: wait for them.
metrics_count_all() {
  curl -sf "http://127.0.0.1:$XMOD_METRICS_PORT/metrics" |
    grep -qx "xmod_runs{state=\"SUCCEEDED\"} $runs"
}
curl -sf "http://127.0.0.1:$XMOD_METRICS_PORT/metrics" >/dev/null ||
  fail "no /metrics on port $XMOD_METRICS_PORT"
wait_until 30 "/metrics to count $runs runs SUCCEEDED" metrics_count_all
curl -sf "http://127.0.0.1:$XMOD_HTTP_PORT/" >/dev/null || fail "no dashboard on $XMOD_HTTP_PORT"
serving || fail "the health service no longer answers SERVING"
scraped() {
  /usr/bin/python3 - "$XMOD_PROMETHEUS_PORT" "$runs" <<'PY'
import json, sys, urllib.parse, urllib.request
def query(expr):
    url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]
up = {s["metric"]["instance"]: s["value"][1] for s in query("up")}
succeeded = query('xmod_runs{state="SUCCEEDED"}')
sys.exit(not (up == {"coordinator:9464": "1", "worker-1:9465": "1", "worker-2:9465": "1"}
              and succeeded and succeeded[0]["value"][1] == sys.argv[2]))
PY
}
wait_until 60 "Prometheus to scrape the coordinator and both workers up" scraped
echo "containers_test: /metrics (port $XMOD_METRICS_PORT) and Prometheus (port" \
  "$XMOD_PROMETHEUS_PORT) count $runs runs succeeded; Prometheus scrapes coordinator," \
  "worker-1 and worker-2"

# --- stop: the workers drain first --------------------------------------------------------------
stop_at=$SECONDS
podman stop -t 60 "$(container worker-1)" "$(container worker-2)" >/dev/null
for name in worker-1 worker-2; do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$(container "$name")")
  [[ $code == 0 ]] || fail "$name exited $code when stopped"
done
compose down -v -t 30 || fail "podman-compose down"
echo "containers_test: workers drained and the cluster stopped in $((SECONDS - stop_at)) s"
# --- the one kind of deploy/k8s that podman 4.3 plays: storage.yaml's claims, as volumes ------
podman kube play "$SRC/deploy/k8s/storage.yaml" >/dev/null || fail "podman kube play storage.yaml"
for claim in xmod-checkpoints xmod-data; do
  podman volume exists "$claim" || fail "podman kube play storage.yaml made no volume $claim"
done
podman volume rm xmod-checkpoints xmod-data >/dev/null
echo "containers_test: podman kube play deploy/k8s/storage.yaml made volumes xmod-checkpoints" \
  "and xmod-data (its StatefulSet, DaemonSet and Service are kinds podman does not play)"
echo "containers_test: PASS in $((SECONDS - start)) s (images:" \
  "$(podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep xmod | paste -sd, -))"
