#!/usr/bin/env python3
"""Checks that a build made from a prefix of unpacked .debs (scripts/gpu-check.sh) used
nothing of the system's own development packages: the device check carries those .debs to a
GPU machine that has none, so whatever leaked in here would be missing there.

Three checks, each against the build's own records:
  headers   every header an object was compiled with (ninja's dependency log) that lies under
            /usr/include or /usr/local/include belongs to the C/C++ toolchain (libc6-dev,
            linux-libc-dev, libstdc++-N-dev, ...), never to a library package;
  link      no link command names a library file under /usr/lib, /usr/local/lib or /lib
            (CMake found every library in the prefix);
  runtime   every shared library the binaries load (ldd, with the prefix's library folder
            first, as gpu-check.sh runs them) comes from the prefix, from LibTorch's wheel, or
            from the base runtime every Debian or Ubuntu machine has (BASE_RUNTIME: glibc,
            libgcc, libstdc++, zlib, xz). Not "Debian priority required": dpkg's own records
            say "optional" for libc6 itself, the archive's overrides being elsewhere.

Usage: check-isolation.py BUILD_DIR PREFIX BINARY... ; prints one JSON object
{"isolated": bool, "headers": [...], "link": [...], "runtime": [...]} (each list the
offenders, at most 20) and exits 1 when anything leaked.
"""
import json
import os
import re
import subprocess
import sys

SYSTEM_INCLUDE = ("/usr/include/", "/usr/local/include/")
SYSTEM_LIB = re.compile(r"(^|\s|-L)(/usr/lib/|/usr/local/lib/|/lib/|/lib64/)\S*")
TOOLCHAIN = re.compile(r"^(libc6-dev|linux-libc-dev|libcrypt-dev|libnsl-dev|libtirpc-dev|"
                       r"libstdc\+\+-\d+-dev|libgcc-\d+-dev)(:\w+)?$")
LIMIT = 20


def owners(paths):
    """{path: package} for the paths dpkg knows (one dpkg -S call per 500 paths)."""
    found = {}
    paths = sorted(paths)
    for i in range(0, len(paths), 500):
        out = subprocess.run(["dpkg", "-S", *paths[i:i + 500]], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("diversion by") or ": " not in line:
                continue
            packages, path = line.split(": ", 1)
            found[path] = packages.split(",")[0].strip()
    return found


def leaked_headers(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True,
                         check=True).stdout
    headers = {os.path.normpath(line.strip()) for line in out.splitlines()
               if line.startswith("    ") and line.strip().startswith(SYSTEM_INCLUDE)}
    # One resolved name per file: /usr/include/x86_64-linux-gnu/... and links alike.
    real = {h: os.path.realpath(h) for h in headers}
    package = owners(set(real.values()) | headers)
    bad = set()
    for h in headers:
        owner = package.get(h) or package.get(real[h])
        if owner is None or not TOOLCHAIN.match(owner):
            bad.add(f"{h} ({owner or 'no package'})")
    return sorted(bad)


def leaked_links(build):
    bad = set()
    with open(os.path.join(build, "build.ninja")) as f:
        for line in f:
            line = line.strip()
            if line.startswith(("LINK_LIBRARIES =", "LINK_PATH =")):
                for match in SYSTEM_LIB.finditer(line):
                    bad.add(match.group(0).strip())
    return sorted(bad)


# Packages of the runtime every Debian 12 / Ubuntu 24.04 system has installed (apt and
# coreutils need them): what the binaries may load from the system.
BASE_RUNTIME = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "liblzma5", "libzstd1",
                "libbz2-1.0", "libcrypt1"}


def loaded_libraries(prefix, binaries):
    """{name: path, or "not found"} of the shared libraries ldd resolves for the binaries, with
    the prefix's library folder first on the search path."""
    env = dict(os.environ)
    lib = os.path.join(prefix, "usr/lib/x86_64-linux-gnu")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                    if env.get("LD_LIBRARY_PATH") else "")
    resolved = {}
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, env=env).stdout
        for line in out.splitlines():
            m = (re.match(r"\s*(\S+) => (.*?) \(", line)
                 or re.match(r"\s*(\S+) => (not found)", line))
            if m:
                resolved.setdefault(m.group(1), m.group(2))
    return resolved


def from_system(path, prefix):
    """Whether a library resolved to path comes from neither the prefix (a folder ending in /)
    nor LibTorch's wheel; one not found does."""
    return path == "not found" or not (os.path.realpath(path).startswith(prefix)
                                       or "/site-packages/" in path)


def from_base_runtime(path, owner):
    """Whether a system library at path (or "not found") of package owner (None when dpkg does
    not know it) is the base runtime's, which the binaries may load."""
    return path != "not found" and owner is not None and owner.split(":")[0] in BASE_RUNTIME


def leaked_runtime(prefix, binaries):
    resolved = loaded_libraries(prefix, binaries)
    prefix = os.path.realpath(prefix) + "/"
    system = {name: path for name, path in resolved.items() if from_system(path, prefix)}
    # dpkg records /usr/lib/... where ldd prints /lib/... (merged /usr): ask for both names.
    found = {p for p in system.values() if p != "not found"}
    package = owners(found | {os.path.realpath(p) for p in found})
    bad = []
    for name, path in sorted(system.items()):
        owner = package.get(path) or package.get(os.path.realpath(path))
        if not from_base_runtime(path, owner):
            bad.append(f"{name} => {path} ({owner or 'no package'})")
    return bad


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    build, prefix, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
    report = {"headers": leaked_headers(build), "link": leaked_links(build),
              "runtime": leaked_runtime(prefix, binaries)}
    isolated = not any(report.values())
    counts = {k: len(v) for k, v in report.items()}
    print(json.dumps({"isolated": isolated, "leaks": counts,
                      **{k: v[:LIMIT] for k, v in report.items()}}, indent=2))
    sys.exit(0 if isolated else 1)


if __name__ == "__main__":
    main()
