# For gw_stacks_try with a probe on PyObject_Size in the interpreter itself: len() at line 7
# runs inside _PyEval_EvalFrameDefault, so on an interpreter built with frame pointers the
# Python frames splice into the native stack at the eval frames.
import sys

def measure(xs):
    return len(xs)

def main():
    sys.stdin.readline()
    measure([1, 2, 3])
    print("called", flush=True)
    sys.stdin.readline()

print("ready", flush=True)
main()
