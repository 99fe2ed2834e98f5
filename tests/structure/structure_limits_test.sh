#!/bin/bash
# The coordinator reads at a glance: no coordinator source over 500 lines, and no function over
# 80 lines in the coordinator, the worker, the trainer contract or the trainer's run loop and
# step (tests and generated code aside). Lengths are lizard's (PyPI), installed into
# .cache/tools-venv on first use. Usage: structure_limits_test.sh <source dir>
set -euo pipefail
src=$1
max_file_lines=500
max_function_lines=80

venv=$src/.cache/tools-venv
mkdir -p "$src/.cache"
exec 9>"$src/.cache/tools-venv.lock"
flock 9
# Run as `python -m lizard`: the venv's console scripts name the folder it was made in, which
# is another checkout's when .cache is shared through a link.
if ! "$venv/bin/python" -m lizard --version >/dev/null 2>&1; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv" || { echo "FAIL: /usr/bin/python3 -m venv" >&2; exit 1; }
  "$venv/bin/python" -m pip install -q --disable-pip-version-check lizard==1.24.3
fi
flock -u 9

cd "$src"
status=0
while read -r lines file; do
  [[ $file == total ]] && continue
  if ((lines > max_file_lines)); then
    echo "FAIL: $file has $lines lines (at most $max_file_lines)"
    status=1
  fi
done < <(git ls-files 'coordinator/*.h' 'coordinator/*.cc' | grep -v '^coordinator/tests/' |
  xargs wc -l)

# lizard -w prints one warning line per function over a threshold; the CCN and argument
# thresholds are set out of reach so that only length counts.
mapfile -t sources < <(git ls-files 'coordinator/*.cc' 'coordinator/*.h' 'worker/*.cc' \
  'worker/*.h' 'trainer_contract/*.cc' 'trainer_contract/*.h' 'model/train/trainer.cc' \
  'model/train/train_step.cc' |
  grep -v -e '_test\.cc$' -e '^coordinator/tests/')
long=$("$venv/bin/python" -m lizard -w -L "$max_function_lines" -C 100000 -a 1000 -T nloc=100000 \
  "${sources[@]}" || true)
if [[ -n $long ]]; then
  echo "FAIL: functions over $max_function_lines lines:"
  echo "$long"
  status=1
fi
((status == 0)) && echo "PASS: ${#sources[@]} files; every coordinator file <= $max_file_lines lines, every function <= $max_function_lines"
exit $status
