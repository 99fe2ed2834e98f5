#!/usr/bin/python3
"""Wire and stored strings have one definition each, a proto enum's string option: the metric
series' names (proto/xmod/v1/series.proto) and the events table's kinds
(proto/xmod/v1/event_kind.proto). No other source outside tests and documentation spells one
as a quoted literal ("val/loss", 'run_preempt_ordered' or `eval/`). The trainer, coordinator,
results database and CLI read them with SeriesName and EventKindName, the dashboard from
/series.js, the Python client from the descriptor (xmod.series), scripts from the proto file.
An event kind of one word (checkpoint) is an everyday word and is not policed. The check
first proves itself on constructed lines.
Usage: wire_strings_test.py <source dir>"""
import pathlib
import re
import subprocess
import sys

SERIES = "proto/xmod/v1/series.proto"
SERIES_RE = re.compile(r'SERIES_(\w+) = \d+ \[\(series_name\) = "([^"]+)"\]')
EVENT_KINDS = "proto/xmod/v1/event_kind.proto"
EVENT_KIND_RE = re.compile(r'EVENT_(\w+) = \d+ \[\(event_kind_name\) = "([^"]+)"\]')
DEFINITIONS = (SERIES, EVENT_KINDS)


def defined_names(src, definition, pattern):
    return dict(pattern.findall((src / definition).read_text()))


def exempt(path):
    """Tests and documentation may spell the names: they state what is expected."""
    return (path in DEFINITIONS or path.endswith(".md") or path.startswith(("docs/", "tests/"))
            or "/tests/" in path or re.search(r"(_test\.(cc|py|sh)|/test_[^/]*\.py)$", path))


def literals(text, names):
    """(line number, name) of each quoted literal in `text` that is exactly a series name."""
    pattern = re.compile(r"""(["'`])(%s)\1""" % "|".join(re.escape(n) for n in names))
    for number, line in enumerate(text.splitlines(), 1):
        for match in pattern.finditer(line):
            yield number, match.group(2)


def check_itself(names):
    lines = 'a = "val/loss"\nb = \'delta/live\'\nc = "val/lossy" + "eval/"\nd = `train/lr`\n'
    found = list(literals(lines, names.values()))
    expected = [(1, "val/loss"), (2, "delta/live"), (3, "eval/"), (4, "train/lr")]
    if found != expected:
        sys.exit(f"FAIL: on constructed lines the check found {found}, expected {expected}")


def read_definitions(src):
    """Every policed name with the file that defines it."""
    series = defined_names(src, SERIES, SERIES_RE)
    if len(series) < 10 or "VAL_LOSS" not in series:
        sys.exit(f"FAIL: {SERIES}: read {len(series)} series, expected every Series value")
    kinds = defined_names(src, EVENT_KINDS, EVENT_KIND_RE)
    if len(kinds) < 10 or "RUN_PREEMPT_ORDERED" not in kinds:
        sys.exit(f"FAIL: {EVENT_KINDS}: read {len(kinds)} kinds, expected every EventKind value")
    check_itself(series)
    names = {name: SERIES for name in series.values()}
    names.update({kind: EVENT_KINDS for kind in kinds.values() if "_" in kind})
    return names


def main():
    src = pathlib.Path(sys.argv[1])
    names = read_definitions(src)
    files = subprocess.run(["git", "-C", str(src), "ls-files"], check=True, capture_output=True,
                           text=True).stdout.split()
    problems = []
    for path in files:
        if exempt(path):
            continue
        try:
            text = (src / path).read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        problems += [f"{path}:{n}: {name} (defined in {names[name]})"
                     for n, name in literals(text, names)]
    if problems:
        print("FAIL: names spelled outside their definition (name them through it):")
        print("\n".join(problems))
        sys.exit(1)
    print(f"PASS: {len(names)} names, {len(files)} files; each spelled only in "
          f"{' or '.join(DEFINITIONS)}")


if __name__ == "__main__":
    main()
