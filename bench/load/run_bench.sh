#!/bin/bash
# The load benchmark: starts one xmod-coordinator on 127.0.0.1 (free ports, a fresh database
# in a temporary folder, data-glob checks off since no run trains), runs bench_load against
# it (200 simulated workers; see bench/load/load_bench.cc for the phases) and prints its one
# JSON summary. About 90 s; all traffic stays on 127.0.0.1.
#
# Usage: bench/load/run_bench.sh [BUILD_DIR] [bench_load flags...]
#   (BUILD_DIR needs the targets xmod-coordinator and bench_load; default build/release)
#   COORDINATOR_FLAGS: more flags of the coordinator, e.g. "--max_ingest_writes=64".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build/release}"
shift || true
for bin in xmod-coordinator bench_load; do
  [[ -x "$build/bin/$bin" ]] || { echo "no $build/bin/$bin: build it first" >&2; exit 2; }
done
work="$(mktemp -d /tmp/xmod_load_XXXXXX)"
coordinator=""
cleanup() {
  [[ -n "$coordinator" ]] && kill "$coordinator" 2>/dev/null && wait "$coordinator" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# 200 workers keep ~400 connections and threads; leave room for them.
ulimit -n 8192 2>/dev/null || true

"$build/bin/xmod-coordinator" --listen=127.0.0.1:0 --http_listen= --metrics_listen= \
  --db="$work/xmod.db" --checkpoint_root="$work/checkpoints" --ports_file="$work/ports.json" \
  --check_data_paths=false --heartbeat_interval_ms=1000 --lease_ttl_ms=15000 \
  ${COORDINATOR_FLAGS:-} >"$work/coordinator.log" 2>&1 &
coordinator=$!
for _ in $(seq 100); do
  [[ -s "$work/ports.json" ]] && break
  kill -0 "$coordinator" 2>/dev/null || { cat "$work/coordinator.log" >&2; exit 1; }
  sleep 0.1
done
port="$(sed -n 's/.*"grpc":\([0-9]*\).*/\1/p' "$work/ports.json")"
[[ -n "$port" ]] || { echo "no gRPC port in $work/ports.json" >&2; exit 1; }

"$build/bin/bench_load" --addr="127.0.0.1:$port" --coordinator_pid="$coordinator" \
  --db="$work/xmod.db" --raw_db="$work/raw.db" --raw_arrival_db="$work/raw_arrival.db" "$@"
