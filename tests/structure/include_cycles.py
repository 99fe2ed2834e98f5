#!/usr/bin/python3
"""No include cycles: between modules (a .h with its .cc, .cu, .cuh) and between folders.

The graph is the #include "..." lines of the production sources git tracks (tests, fuzz
targets and benchmarks aside): module A -> B when a file of A includes a header of B; folder
F -> G when a file in F includes one in G (each folder on its own: model/train and model/eval
are two nodes). A strongly connected set of two or more nodes is a cycle: modules that can
only be understood together, or folders whose layering goes both ways.

Usage: include_cycles.py SOURCE_DIR; prints each cycle and exits 1 when there is one.
--self-test: checks that a constructed cycle of each kind is found (the test runs both).
"""
import collections
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')
NOT_PRODUCTION = re.compile(r"(_test\.(cc|h)$|^tests/|/tests/|^fuzz/|^bench/|/testdata/)")


def production_sources(root):
    files = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h", "*.cu", "*.cuh"],
                           capture_output=True, text=True, check=True).stdout.split()
    return [f for f in files if not NOT_PRODUCTION.search(f)]


def graphs(root, files):
    """(module graph, folder graph) of the includes among `files`."""
    modules, folders = collections.defaultdict(set), collections.defaultdict(set)
    for f in files:
        with open(os.path.join(root, f), errors="replace") as text:
            for line in text:
                m = INCLUDE.match(line)
                if not m or not os.path.exists(os.path.join(root, m.group(1))):
                    continue
                target = m.group(1)
                a, b = os.path.splitext(f)[0], os.path.splitext(target)[0]
                if a != b:
                    modules[a].add(b)
                fa, fb = os.path.dirname(f), os.path.dirname(target)
                if fa != fb:
                    folders[fa].add(fb)
    return modules, folders


def cycles(graph):
    """Strongly connected components of two or more nodes (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in list(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def report(root):
    modules, folders = graphs(root, production_sources(root))
    problems = [("modules", c) for c in cycles(modules)] + [("folders", c) for c in cycles(folders)]
    for kind, members in problems:
        print(f"include cycle between {kind}: {' <-> '.join(members)}")
    return problems


def self_test():
    module_cycle = {"a/x": {"a/y"}, "a/y": {"a/x"}, "a/z": {"a/x"}}
    folder_cycle = {"model/train": {"model/eval"}, "model/eval": {"model/train"}, "data": set()}
    assert cycles(module_cycle) == [["a/x", "a/y"]], cycles(module_cycle)
    assert cycles(folder_cycle) == [["model/eval", "model/train"]], cycles(folder_cycle)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    print("ok: constructed module and folder cycles are found, a chain is not a cycle")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--self-test":
        self_test()
        sys.exit(0)
    if report(sys.argv[1]):
        sys.exit(1)
    print("ok: no include cycle between modules or folders")
