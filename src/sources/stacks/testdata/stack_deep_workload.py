# Benchmark workload (bench/stacks_bench.cc): like stack_workload.py, but the ctypes call sits
# DEPTH Python frames deep, to measure the BPF frame walk per frame.
# Usage: python stack_deep_workload.py LIBRARY CALLS DEPTH
import ctypes
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
count = int(sys.argv[2])
depth = int(sys.argv[3])


def nest(d, i):
    if d > 0:
        return nest(d - 1, i)
    return lib.gw_stack_target(i)


def main():
    sys.stdin.readline()
    start = time.perf_counter_ns()
    for i in range(count):
        nest(depth, i)
    elapsed = time.perf_counter_ns() - start
    print("called %.1f" % (elapsed / count), flush=True)
    sys.stdin.readline()


print("ready", flush=True)
main()
