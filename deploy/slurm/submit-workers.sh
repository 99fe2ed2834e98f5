#!/usr/bin/env bash
# Submits N worker jobs (one node each) as a job array: submit-workers.sh N HOST:PORT.
set -euo pipefail
count=${1:?usage: submit-workers.sh N HOST:PORT}
coordinator=${2:?usage: submit-workers.sh N HOST:PORT}
exec sbatch --array=1-"$count" --export=ALL,XMOD_COORDINATOR="$coordinator" \
  "$(dirname "$0")/xmod-worker.sbatch"
