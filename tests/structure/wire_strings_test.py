#!/usr/bin/python3
"""The metric series' names have one definition, proto/xmod/v1/series.proto: no other source
outside tests and documentation spells one as a quoted literal ("val/loss", 'train/loss' or
`eval/`). The trainer, coordinator, results database and CLI read them with SeriesName, the
dashboard from /series.js, the Python client from the descriptor (xmod.series), scripts from
the proto file. The check first proves itself on constructed lines.
Usage: wire_strings_test.py <source dir>"""
import pathlib
import re
import subprocess
import sys

DEFINITION = "proto/xmod/v1/series.proto"
SERIES_RE = re.compile(r'SERIES_(\w+) = \d+ \[\(series_name\) = "([^"]+)"\]')


def series_names(src):
    return dict(SERIES_RE.findall((src / DEFINITION).read_text()))


def exempt(path):
    """Tests and documentation may spell the names: they state what is expected."""
    return (path == DEFINITION or path.endswith(".md") or path.startswith(("docs/", "tests/"))
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


def main():
    src = pathlib.Path(sys.argv[1])
    names = series_names(src)
    if len(names) < 10 or "VAL_LOSS" not in names:
        sys.exit(f"FAIL: {DEFINITION}: read {len(names)} series, expected every Series value")
    check_itself(names)
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
        problems += [f"{path}:{n}: {name}" for n, name in literals(text, names.values())]
    if problems:
        print(f"FAIL: series names spelled outside {DEFINITION} (name them through it):")
        print("\n".join(problems))
        sys.exit(1)
    print(f"PASS: {len(names)} series, {len(files)} files; each name spelled only in {DEFINITION}")


if __name__ == "__main__":
    main()
