#!/usr/bin/env bash
# Submits N xmod workers as a Slurm job array of N one-node jobs (xmod-worker.sbatch):
#
#   submit-workers.sh N HOST:PORT [SBATCH_OPTION...]
#
# HOST:PORT is the coordinator's gRPC address; SBATCH_OPTIONs override the sbatch file's
# defaults (e.g. --partition=gpu --gres=gpu:4 --cpus-per-task=32 --time=12:00:00). The job
# reads XMOD_BIN_DIR, XMOD_TOKEN_DIR, XMOD_WORKER_NAME, ... from this environment (listed in
# xmod-worker.sbatch). Prints sbatch's "Submitted batch job ID" line.
set -euo pipefail
usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
count=$1
coordinator=$2
shift 2
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "submit-workers.sh: N: \"$count\" is not a positive count" >&2; exit 2; }
[[ $coordinator == *:* ]] || { echo "submit-workers.sh: HOST:PORT: \"$coordinator\" has no port" >&2; exit 2; }
exec sbatch --array=1-"$count" --export=ALL,XMOD_COORDINATOR="$coordinator" "$@" \
  "$(dirname "$0")/xmod-worker.sbatch"
