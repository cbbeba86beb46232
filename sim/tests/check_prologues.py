#!/usr/bin/env python3
"""Checks that every exported CUDA entry point of the sim libraries starts with
`55 48 89 e5` (push %rbp; mov %rsp,%rbp), like the real libcudart/libcuda (docs/facts.md), so that
uprobes on them take the same single-trap path and cost the same.

Usage: check_prologues.py LIB...   (exit 0 when every exported function matches)
"""
import re
import subprocess
import sys

EXPECTED = "55 48 89 e5"


def exported_functions(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, text=True,
                         capture_output=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "t", "W"):
            names.add(parts[2].split("@")[0])
    return names


def first_bytes(lib):
    """Maps function name -> the first 4 bytes of its code, from one objdump pass."""
    out = subprocess.run(["objdump", "-d", lib], check=True, text=True,
                         capture_output=True).stdout
    result = {}
    current = None
    collected = []
    header = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
    insn = re.compile(r"^\s+[0-9a-f]+:\t((?:[0-9a-f]{2} )+)")
    for line in out.splitlines():
        m = header.match(line)
        if m:
            label = m.group(1)
            # PLT stubs ("name@plt") are not the function.
            current = None if label.endswith("@plt") else label.split("@")[0]
            collected = []
            continue
        if current is None:
            continue
        m = insn.match(line)
        if m:
            collected.extend(m.group(1).split())
            if len(collected) >= 4:
                result.setdefault(current, " ".join(collected[:4]))
                current = None
    return result


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    failures = 0
    for lib in sys.argv[1:]:
        names = exported_functions(lib)
        code = first_bytes(lib)
        checked = 0
        for name in sorted(names):
            got = code.get(name)
            if got is None:
                print(f"{lib}: {name}: no disassembly found")
                failures += 1
            elif got != EXPECTED:
                print(f"{lib}: {name}: starts with {got}, expected {EXPECTED}")
                failures += 1
            checked += 1
        print(f"{lib}: {checked} exported functions checked")
    if failures:
        print(f"FAIL: {failures} exported functions do not start with {EXPECTED}")
        return 1
    print("OK: every exported function starts with push %rbp; mov %rsp,%rbp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
