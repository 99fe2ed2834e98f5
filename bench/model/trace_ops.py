#!/usr/bin/env python3
"""Op-by-op time of a bench_model --profile trace (LibTorch's chrome trace of one step).

Prints, for each trace, the self time of every ATen op name summed over the step (an op's
duration less that of the ops it called), largest first, with its share of the step and the
number of calls. Usage: bench/model/trace_ops.py TRACE [TRACE...] [--top N]
(bench_model --profile P writes P.dense and P.xmod.)
"""
import argparse
import collections
import json


def self_times(path):
    data = json.load(open(path))
    events = data if isinstance(data, list) else data["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and "dur" in e]
    ops.sort(key=lambda e: (str(e.get("tid")), e["ts"], -e["dur"]))
    self_us, calls = collections.Counter(), collections.Counter()
    total_us = 0.0
    open_ops = {}  # tid -> stack of (end, name)
    for op in ops:
        stack = open_ops.setdefault(op.get("tid"), [])
        while stack and stack[-1][0] <= op["ts"] + 1e-9:
            stack.pop()
        if stack:
            self_us[stack[-1][1]] -= op["dur"]
        else:
            total_us += op["dur"]
        self_us[op["name"]] += op["dur"]
        calls[op["name"]] += 1
        stack.append((op["ts"] + op["dur"], op["name"]))
    return self_us, calls, total_us


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    for path in args.traces:
        self_us, calls, total_us = self_times(path)
        print(f"== {path}: {total_us / 1e3:.1f} ms in top-level ops")
        for name, us in self_us.most_common(args.top):
            print(f"  {us / 1e3:9.1f} ms {100 * us / total_us:5.1f}%  x{calls[name]:<5} {name}")


if __name__ == "__main__":
    main()
