# Calls gw_stack_target() of the test library through ctypes from known lines; stacks_test.cc
# asserts them (step: 14, main: 23, <module>: 30; blocked in main: 26). Keep them in sync.
# The library is loaded after "go", i.e. after the test snapshotted this process's maps.
import ctypes
import sys
import time

lib = None
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def step(i):
    # the call is deliberately not on the line after `def`
    return lib.gw_stack_target(i)


def main():
    global lib
    sys.stdin.readline()  # "go": the probe is attached
    lib = ctypes.CDLL(sys.argv[1])
    start = time.perf_counter_ns()
    for i in range(count):
        step(i)
    elapsed = time.perf_counter_ns() - start
    print("called %.1f" % (elapsed / count), flush=True)
    sys.stdin.readline()  # "done": the test has read what it needs


print("ready", flush=True)
main()
