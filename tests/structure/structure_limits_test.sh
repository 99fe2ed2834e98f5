#!/bin/bash
# The code reads at a glance: no coordinator source over 500 lines, and no function anywhere
# outside tests (C++, CUDA, Python, JavaScript) over 60 lines or over cyclomatic complexity 15.
# A JavaScript module's wrapper (`const XmodX = (() => { ... })();`) is a module, not a
# function: the functions inside it are measured. Lengths and complexity are lizard's (PyPI),
# installed into .cache/tools-venv on first use. The script first checks that it finds a
# constructed long function and a constructed complex one.
# Usage: structure_limits_test.sh <source dir>
set -euo pipefail
src=$(cd "$1" && pwd)
max_file_lines=500
max_function_lines=60
max_complexity=15

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

# lizard -w prints one warning line per function over a threshold ("<file>:<line>: warning:
# <name> has ..."); the argument and NLOC thresholds are set out of reach. Module wrappers are
# dropped by their first line.
over_limits() {
  local warning file line
  while IFS= read -r warning; do
    file=${warning%%:*}
    line=${warning#*:}
    line=${line%%:*}
    if [[ $file == *.js ]] && sed -n "${line}p" "$file" | grep -qE '^const Xmod[A-Za-z]* = \(\(\) => \{$'; then
      continue
    fi
    echo "$warning"
  done < <("$venv/bin/python" -m lizard -w -L "$max_function_lines" -C "$max_complexity" \
    -a 1000 -T nloc=100000 "$@" || true)
}

# The check finds what it is for.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo 'int Long() {'
  for i in $(seq 61); do echo "  int v$i = $i;"; done
  echo '  return 0;'
  echo '}'
  echo 'int Complex(int x) {'
  for i in $(seq 15); do echo "  if (x == $i) return $i;"; done
  echo '  return 0;'
  echo '}'
  echo 'int Short(int x) { return x > 0 ? x : -x; }'
} >"$work/constructed.cc"
echo 'const XmodModule = (() => {' >"$work/constructed.js"
for i in $(seq 70); do echo "  const v$i = $i;" >>"$work/constructed.js"; done
echo '  return {};' >>"$work/constructed.js"
echo '})();' >>"$work/constructed.js"
found=$(cd "$work" && over_limits constructed.cc constructed.js | sed 's/ has .*//')
expected=$'constructed.cc:1: warning: Long\nconstructed.cc:65: warning: Complex'
if [[ $found != "$expected" ]]; then
  echo "FAIL: on constructed sources the check found:"
  echo "$found"
  echo "expected:"
  echo "$expected"
  exit 1
fi

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

mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.py' '*.js' |
  grep -v -e '_test\.cc$' -e '_test\.py$' -e '/tests/' -e '^tests/' -e '/test_[^/]*\.py$')
long=$(over_limits "${sources[@]}")
if [[ -n $long ]]; then
  echo "FAIL: functions over $max_function_lines lines or complexity $max_complexity:"
  echo "$long"
  status=1
fi
((status == 0)) && echo "PASS: ${#sources[@]} files; every coordinator file <= $max_file_lines lines, every function <= $max_function_lines lines and complexity <= $max_complexity"
exit $status
