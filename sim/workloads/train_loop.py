#!/usr/bin/env python3
"""gw_train_loop in Python: a training loop on the simulated CUDA runtime through ctypes.

Forked DataLoader-style workers (named with prctl, default "pt_data_worker") produce batches
into shared memory and announce them through pipes; the main loop copies each batch to the
device, launches K kernels, synchronizes and reads a loss back, like a PyTorch job. Every CUDA
call is made directly on its own source line, so a tracer that maps calls to file:line sees a
distinct, stable line per call site.

Job shapes for end-to-end tests of gpuwhy (each off by default): --gil-thread (a pure-Python
thread competing for the GIL), --main-thread-batches (num_workers=0: batches built on the main
thread), --helper-thread (backward launches on a second Python thread), --neighbour (another
process's long kernels on a GPU shared with GWSIM_SHARED_DEVICE=1); tiny kernels are
--kernels-per-step 2000 --kernel-us 5.

Simulator convention: a kernel's first argument is a uint64 duration in nanoseconds.
The sim libraries come from --lib-dir or $GWSIM_LIB_DIR (e.g. build/sim/lib).
Runs on CPython 3.10-3.13.
"""

import argparse
import ctypes
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
FATBIN_WRAPPER_MAGIC = 0x466243B1
HOST_TO_DEVICE = 1
DEVICE_TO_HOST = 2
KERNELS = [  # (device name, grid, block), as the C++ workload registers them
    (b"_Z11gemm_kernelPKfS0_Pfiii", 256, 256),
    (b"_Z17layernorm_forwardPKfPfi", 128, 512),
    (b"ampere_sgemm_128x64_tn", 512, 128),
    (b"_Z13relu_backwardPfPKfi", 128, 256),
    (b"_Z12adamw_updatePfS_S_PKffffi", 64, 1024),
]
MESSAGE = struct.Struct("=IIQ")  # slot, pad, sequence number


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class FatbinWrapper(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_int), ("version", ctypes.c_int),
                ("data", ctypes.c_void_p), ("filename_or_fatbins", ctypes.c_void_p)]


class StopRequested(Exception):
    """Raised from the SIGTERM/SIGINT handler to leave blocking calls."""


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b")
    mult = units.get(t[-1:], 1)
    if t[-1:] in units:
        t = t[:-1]
    value = int(float(t) * mult)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="train_loop.py",
        description="A training loop on the simulated CUDA runtime (sim libcudart.so.13).")
    p.add_argument("--steps", type=int, default=0, help="stop after N steps (0: use --duration)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="stop after SEC seconds (default 10; 0: use --steps)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    p.add_argument("--batch-cpu-ms", type=float, default=5.0,
                   help="CPU time each batch costs a worker (default 5)")
    p.add_argument("--batch-bytes", type=parse_size, default=4 << 20,
                   help="bytes per batch, K/M/G suffix allowed (default 4M)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per batch (default 32)")
    p.add_argument("--kernels-per-step", type=int, default=8, help="launches per step (8)")
    p.add_argument("--kernel-us", type=float, default=1000.0,
                   help="simulated duration of each kernel in µs (default 1000)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--pinned", dest="pinned", action="store_true", default=True,
                      help="batches live in page-locked memory (default)")
    mode.add_argument("--pageable", dest="pinned", action="store_false",
                      help="batches live in pageable memory (staged, synchronous copies)")
    p.add_argument("--io-file", help="each batch also reads --batch-bytes from this file")
    p.add_argument("--odirect", action="store_true", help="open --io-file with O_DIRECT")
    p.add_argument("--touch-mb", type=float, default=0.0,
                   help="each batch touches MB of fresh memory (page faults)")
    p.add_argument("--sync-every", type=int, default=1,
                   help="cudaStreamSynchronize every N steps (default 1; 0: never)")
    p.add_argument("--dtoh-every", type=int, default=10,
                   help="read the loss back every N steps (default 10; 0: never)")
    p.add_argument("--malloc-per-step", action="store_true",
                   help="cudaMalloc/cudaFree a batch-sized buffer every step")
    p.add_argument("--empty-cache", type=int, default=0, metavar="N",
                   help="allocator churn as torch.cuda.empty_cache() every step makes it: N "
                        "buffers of --empty-cache-mb are cudaMalloc'd before the step's launches "
                        "and cudaFree'd back to back after them (the first free waits out the "
                        "step's kernels)")
    p.add_argument("--empty-cache-mb", type=float, default=1.0,
                   help="MiB per --empty-cache buffer (1)")
    p.add_argument("--worker-comm", default="pt_data_worker", help="worker process name")
    p.add_argument("--prefetch", type=int, default=2, help="batches in flight per worker (2)")
    p.add_argument("--gil-thread", action="store_true",
                   help="start a pure-Python daemon thread that spins on integer arithmetic "
                        "(spin_gil), so the main thread's Python code waits for the GIL")
    p.add_argument("--gil-thread-start", type=float, default=0.0, metavar="S",
                   help="--gil-thread starts spinning S seconds after the training loop "
                        "starts (default 0)")
    p.add_argument("--gil-thread-duty", type=float, default=1.0, metavar="F",
                   help="--gil-thread spins F of the time, in bursts of F x 20 ms separated "
                        "by sleeps (default 1: always)")
    p.add_argument("--main-thread-batches", action="store_true",
                   help="num_workers=0: fork no workers; the main thread builds each batch "
                        "(--batch-cpu-ms of CPU in build_batch_on_main_thread), then copies it")
    p.add_argument("--helper-thread", action="store_true",
                   help="a second Python thread (pt_autograd_0) launches the backward half of "
                        "each step's kernels while the main thread waits on a threading.Event")
    p.add_argument("--neighbour", action="store_true",
                   help="be a neighbour on a shared GPU instead of a trainer: no workers, no "
                        "batches, back-to-back kernels of --neighbour-kernel-ms with a "
                        "cudaStreamSynchronize every --neighbour-sync-every (a step is one "
                        "kernel); run it next to a trainer, both with GWSIM_SHARED_DEVICE=1")
    p.add_argument("--neighbour-kernel-ms", type=float, default=20.0,
                   help="--neighbour: kernel duration in ms (default 20)")
    p.add_argument("--neighbour-sync-every", type=int, default=5,
                   help="--neighbour: synchronize every N kernels (default 5; 0: never)")
    p.add_argument("--checkpoint-file", metavar="PATH",
                   help="the main thread writes a checkpoint of --checkpoint-mb MB to PATH "
                        "every --checkpoint-every steps (write, then fsync: what torch.save "
                        "of a large state dict to local disk costs the loop)")
    p.add_argument("--checkpoint-mb", type=float, default=64.0,
                   help="--checkpoint-file: size in MB (default 64)")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="--checkpoint-file: steps between checkpoints (default 100)")
    p.add_argument("--checkpoint-thread", action="store_true",
                   help="--checkpoint-file: a background thread writes the checkpoint holding a "
                        "lock that the main thread takes every step (to hand over its metrics), "
                        "so the loop waits for the write on another thread")
    p.add_argument("--batch-sleep-ms", type=float, default=0.0, metavar="MS",
                   help="each worker sleeps MS before producing a batch (a fetch from the "
                        "network: a timer ends the sleep as an interrupt ends a socket read)")
    p.add_argument("--main-sleep-ms", type=float, default=0.0, metavar="MS",
                   help="the main thread sleeps MS each step, after its sync (time.sleep: a "
                        "throttle, or a loop polling for a file): the GPU idles through it")
    p.add_argument("--poll-sleep-ms", type=float, default=0.0, metavar="MS",
                   help="the main thread sleeps MS each step after queuing it, before its sync "
                        "(a polling throttle the GPU works through while the step's kernels "
                        "last longer than the sleep)")
    p.add_argument("--wait-program-every", type=int, default=0, metavar="N",
                   help="every N steps the main thread runs a separate program and waits for "
                        "it (subprocess.run: a synchronous eval or upload script); it computes "
                        "--wait-program-ms of CPU")
    p.add_argument("--wait-program-ms", type=float, default=200.0, metavar="MS",
                   help="--wait-program-every: the program's CPU time in ms (default 200)")
    p.add_argument("--report", action="store_true",
                   help="print one machine-readable line at exit, 'gw_train_loop: steps=N "
                        "seconds=S steps_per_s=X samples_per_s=Y' (the training loop's steps "
                        "and wall time, setup excluded)")
    p.add_argument("--lib-dir", default=os.environ.get("GWSIM_LIB_DIR"),
                   help="directory of the sim libcudart.so.13 (default $GWSIM_LIB_DIR)")
    args = p.parse_args(argv)
    if args.steps == 0 and args.duration == 0:
        p.error("one of --steps or --duration must be non-zero")
    if args.odirect and not args.io_file:
        p.error("--odirect needs --io-file")
    if not args.lib_dir:
        p.error("no sim library directory: pass --lib-dir or set GWSIM_LIB_DIR "
                "(e.g. build/sim/lib)")
    if args.workers < 0 or args.prefetch < 1:
        p.error("--workers must be >= 0 and --prefetch >= 1")
    if args.gil_thread_start < 0:
        p.error("--gil-thread-start must be >= 0")
    if not 0 < args.gil_thread_duty <= 1:
        p.error("--gil-thread-duty must be in (0, 1]")
    if args.neighbour and (args.neighbour_kernel_ms < 0 or args.neighbour_sync_every < 0):
        p.error("--neighbour-kernel-ms and --neighbour-sync-every must be >= 0")
    if min(args.batch_sleep_ms, args.main_sleep_ms, args.poll_sleep_ms, args.wait_program_every,
           args.wait_program_ms) < 0:
        p.error("--batch-sleep-ms, --main-sleep-ms, --poll-sleep-ms, --wait-program-every and "
                "--wait-program-ms must be >= 0")
    if args.main_thread_batches or args.neighbour:
        args.workers = 0  # num_workers=0: nothing is forked
    return args


def load_runtime(lib_dir):
    path = os.path.join(lib_dir, "libcudart.so.13")
    if not os.path.exists(path):
        sys.exit(f"train_loop.py: {path} not found — hint: build the sim libraries "
                 "(cmake --build BUILD --target gwsim_libs) and pass --lib-dir BUILD/sim/lib")
    rt = ctypes.CDLL(path)
    vp, sz, i, u = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
    signatures = {
        "cudaGetDeviceCount": [ctypes.POINTER(i)],
        "cudaSetDevice": [i],
        "cudaMalloc": [ctypes.POINTER(vp), sz],
        "cudaFree": [vp],
        "cudaMallocHost": [ctypes.POINTER(vp), sz],
        "cudaFreeHost": [vp],
        "cudaMemset": [vp, i, sz],
        "cudaMemcpyAsync": [vp, vp, sz, i, vp],
        "cudaLaunchKernel": [vp, Dim3, Dim3, ctypes.POINTER(vp), sz, vp],
        "cudaStreamSynchronize": [vp],
        "cudaDeviceSynchronize": [],
        "cudaHostRegister": [vp, sz, u],
        "cudaHostUnregister": [vp],
        "cudaEventCreate": [ctypes.POINTER(vp)],
        "cudaEventRecord": [vp, vp],
        "cudaEventSynchronize": [vp],
    }
    for name, argtypes in signatures.items():
        fn = getattr(rt, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    rt.cudaGetErrorString.argtypes = [ctypes.c_int]
    rt.cudaGetErrorString.restype = ctypes.c_char_p
    rt.__cudaRegisterFatBinary.argtypes = [vp]
    rt.__cudaRegisterFatBinary.restype = vp
    rt.__cudaRegisterFatBinaryEnd.argtypes = [vp]
    rt.__cudaRegisterFatBinaryEnd.restype = None
    rt.__cudaRegisterFunction.argtypes = [vp, vp, ctypes.c_char_p, ctypes.c_char_p, i,
                                          vp, vp, vp, vp, vp]
    rt.__cudaRegisterFunction.restype = None
    return rt


class CudaError(RuntimeError):
    pass


def check(rt, err, what):
    if err != 0:
        raise CudaError(f"{what} failed: {rt.cudaGetErrorString(err).decode()} ({err})")


class Kernels:
    """Registers the kernels like nvcc-generated code: a fat binary and host stub addresses."""

    def __init__(self, rt):
        payload = b"GWSIMFB1" + b"".join(name + b"\0" for name, _, _ in KERNELS) + b"\0"
        self._payload = ctypes.create_string_buffer(payload, len(payload))
        self._wrapper = FatbinWrapper(FATBIN_WRAPPER_MAGIC, 1,
                                      ctypes.addressof(self._payload), None)
        self._stubs = [ctypes.create_string_buffer(1) for _ in KERNELS]  # unique addresses
        self.entries = []  # (host stub address, Dim3 grid, Dim3 block)
        # getattr: a literal rt.__name inside a class body would be name-mangled.
        register_fatbin = getattr(rt, "__cudaRegisterFatBinary")
        register_function = getattr(rt, "__cudaRegisterFunction")
        register_end = getattr(rt, "__cudaRegisterFatBinaryEnd")
        handle = register_fatbin(ctypes.addressof(self._wrapper))
        for (name, grid, block), stub in zip(KERNELS, self._stubs):
            register_function(handle, ctypes.addressof(stub), name, name, -1, None, None, None, None, None)
            self.entries.append((ctypes.addressof(stub), Dim3(grid, 1, 1), Dim3(block, 1, 1)))
        register_end(handle)


def set_comm(name):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    return libc


_PATTERN = {}


def batch_pattern(n):
    """n bytes of pseudo-random data, made once per process (fresh big allocations page-fault)."""
    if n not in _PATTERN:
        block = random.Random(n).randbytes(4096)
        _PATTERN[n] = (block * (n // 4096 + 1))[:n]
    return _PATTERN[n]


def load_batch(args, slot_addr, io_fd, io_buf, io_state, seed):
    """A batch's optional file read and page faults, and its pattern written into the slot."""
    if io_fd is not None:
        remaining = args.batch_bytes
        while remaining > 0:
            if io_state["offset"] + len(io_buf) > io_state["size"]:
                io_state["offset"] = 0
            got = os.preadv(io_fd, [io_buf], io_state["offset"])
            if got <= 0:
                io_state["offset"] = 0
                continue
            io_state["offset"] += got
            remaining -= min(got, remaining)
    if args.touch_mb > 0:
        size = int(args.touch_mb * (1 << 20))
        fresh = mmap.mmap(-1, size)
        fresh[::4096] = b"\x01" * len(range(0, size, 4096))
        fresh.close()
    n = args.batch_bytes
    ctypes.memmove(slot_addr, batch_pattern(n), n)
    ctypes.memmove(slot_addr, struct.pack("=Q", seed), min(8, n))


def produce_batch(args, slot_addr, io_fd, io_buf, io_state, seed):
    """One batch: optional file read and page faults, then CPU work that fills the slot."""
    cpu_start = time.thread_time()
    load_batch(args, slot_addr, io_fd, io_buf, io_state, seed)
    augment_batch(args, slot_addr, seed, cpu_start)


def augment_batch(args, slot_addr, seed, cpu_start):
    """Keep "augmenting" the slot until the batch has cost batch_cpu_ms of this thread's CPU
    time since cpu_start."""
    n = args.batch_bytes
    data = (ctypes.c_ubyte * n).from_address(slot_addr)
    x = seed
    i = 0
    while (time.thread_time() - cpu_start) * 1000.0 < args.batch_cpu_ms:
        for _ in range(256):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
            data[i] = x >> 56
            i = (i + 4099) % n


def build_batch_on_main_thread(args, slot_addr, seed):
    """--main-thread-batches (num_workers=0): produce_batch's work on the trainer's main thread,
    in a frame of its own name, so a Python stack shows who builds the batch."""
    cpu_start = time.thread_time()
    load_batch(args, slot_addr, None, None, None, seed)
    augment_batch(args, slot_addr, seed, cpu_start)


def spin_gil(control):
    """--gil-thread: pure-Python integer arithmetic that holds the GIL except when the
    interpreter's switch interval makes it hand the GIL over."""
    if control["start_s"] > 0:
        time.sleep(control["start_s"])  # releases the GIL
    x = 1
    duty = control["duty"]
    if duty >= 1:
        while control["spin"]:
            x = (x * 1103515245 + 12345) & 0x7fffffff
        return x
    period = 0.020
    while control["spin"]:  # bursts of duty × period, then a sleep (the GIL is free)
        burst_end = time.monotonic() + duty * period
        while time.monotonic() < burst_end:
            for _ in range(256):
                x = (x * 1103515245 + 12345) & 0x7fffffff
        time.sleep((1 - duty) * period)
    return x


def start_gil_thread(args):
    control = {"spin": True, "start_s": args.gil_thread_start, "duty": args.gil_thread_duty}
    t = threading.Thread(target=spin_gil, args=(control,), name="spin_gil", daemon=True)
    t.start()
    return control


def worker_main(args, index, slots_addr, data_w, free_r):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = set_comm(args.worker_comm)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # never outlive the trainer
    if os.getppid() == 1:
        os._exit(0)
    io_fd, io_buf, io_state = None, None, {"offset": 0, "size": 0}
    if args.io_file:
        flags = os.O_RDONLY | (os.O_DIRECT if args.odirect else 0)
        io_fd = os.open(args.io_file, flags)
        size = os.fstat(io_fd).st_size & ~4095 if args.odirect else os.fstat(io_fd).st_size
        io_state["size"] = size
        io_buf = mmap.mmap(-1, max(4096, min(1 << 20, size) & ~4095))  # page-aligned
        io_state["offset"] = (index * 7919 * 4096) % max(size, 1) & ~4095
        if size < len(io_buf):
            io_fd = None
    free_slots = list(range(args.prefetch))
    seq = index
    try:
        while True:
            if not free_slots:
                data = os.read(free_r, 4)
                if len(data) < 4:
                    break  # the trainer closed the pipe
                free_slots.append(struct.unpack("=I", data)[0])
            slot = free_slots.pop()
            if args.batch_sleep_ms:
                time.sleep(args.batch_sleep_ms / 1000)  # the fetch's round trip
            produce_batch(args, slots_addr + slot * args.batch_bytes, io_fd, io_buf, io_state,
                          seq)
            os.write(data_w, MESSAGE.pack(slot, 0, seq))
            seq += args.workers
    except (BrokenPipeError, OSError):
        pass
    finally:
        os._exit(0)


def start_workers(args):
    workers = []  # dicts: pid, data_r, free_w, slots, base
    for index in range(args.workers):
        data_r, data_w = os.pipe()
        free_r, free_w = os.pipe()
        slots = mmap.mmap(-1, args.prefetch * args.batch_bytes,
                          flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        base = ctypes.addressof(ctypes.c_char.from_buffer(slots))
        with warnings.catch_warnings():
            # 3.12+ warns about fork() in a multi-threaded process (the simulated device's
            # stream threads); DataLoader workers are forked the same way after CUDA init.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(data_r)
            os.close(free_w)
            for other in workers:
                os.close(other["data_r"])
                os.close(other["free_w"])
            worker_main(args, index, base, data_w, free_r)
        os.close(data_w)
        os.close(free_r)
        workers.append({"pid": pid, "data_r": data_r, "free_w": free_w, "slots": slots,
                        "base": base})
    return workers


def stop_workers(workers):
    for w in workers:
        for fd in (w["free_w"], w["data_r"]):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(w["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    for w in workers:
        while True:
            try:
                os.waitpid(w["pid"], 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break


def read_message(fd):
    data = b""
    while len(data) < MESSAGE.size:
        chunk = os.read(fd, MESSAGE.size - len(data))
        if not chunk:
            return None
        data += chunk
    return MESSAGE.unpack(data)


class BackwardThread:
    """--helper-thread: a Python thread (comm pt_autograd_0, like PyTorch's autograd thread)
    that launches kernels [first, last) of a step when the main thread hands them over; the
    main thread sleeps on a threading.Event meanwhile."""

    def __init__(self, args, rt, kernels, state):
        self.args, self.rt, self.kernels, self.state = args, rt, kernels, state
        self.go, self.done = threading.Event(), threading.Event()
        self.work = None  # (first, last), or None to stop
        self.error = None
        self.thread = threading.Thread(target=self.loop, name="pt_autograd_0", daemon=True)
        self.thread.start()

    def loop(self):
        set_comm("pt_autograd_0")
        rt, kernels, state, vp = self.rt, self.kernels, self.state, ctypes.c_void_p
        kernel_ns = ctypes.c_uint64(int(self.args.kernel_us * 1000))
        stream = None
        while True:
            self.go.wait()
            self.go.clear()
            if self.work is None:
                return
            try:
                for k in range(*self.work):
                    stub, grid, block = kernels.entries[k % len(kernels.entries)]
                    params = (vp * 3)(ctypes.addressof(kernel_ns), ctypes.addressof(state["d_batch"]), ctypes.addressof(state["d_loss"]))
                    check(rt, rt.cudaLaunchKernel(stub, grid, block, params, 0, stream), "cudaLaunchKernel backward")
            except CudaError as e:
                self.error = e
            self.done.set()

    def run_backward(self, first, last):
        self.work = (first, last)
        self.done.clear()
        self.go.set()
        while not self.done.wait(0.2):  # timed: a stop signal still reaches the main thread
            pass
        if self.error is not None:
            raise self.error

    def stop(self):
        self.work = None
        self.go.set()


def neighbour(args, rt, kernels, state):
    """--neighbour: another process's job on the same GPU, back-to-back long kernels."""
    stream = None
    kernel_ns = ctypes.c_uint64(int(args.neighbour_kernel_ms * 1e6))
    stub, grid, block = kernels.entries[2]  # ampere_sgemm_128x64_tn
    params = (ctypes.c_void_p * 3)(ctypes.addressof(kernel_ns), ctypes.addressof(state["d_batch"]), ctypes.addressof(state["d_loss"]))
    start = time.monotonic()
    step = 0
    while not (args.steps and step >= args.steps) and not (
            args.duration and time.monotonic() - start >= args.duration):
        check(rt, rt.cudaLaunchKernel(stub, grid, block, params, 0, stream), "cudaLaunchKernel neighbour")
        step += 1
        if args.neighbour_sync_every and step % args.neighbour_sync_every == 0:
            check(rt, rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize neighbour")
        state["steps"] = step
    check(rt, rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize neighbour")
    state["seconds"] = time.monotonic() - start


def write_checkpoint(args):
    """The main thread saves a checkpoint: --checkpoint-mb MB written and fsync'ed, the file
    replaced each time (a new inode, so the page cache cannot absorb the writes)."""
    chunk = b"\x5a" * (1 << 20)
    tmp = args.checkpoint_file + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = int(args.checkpoint_mb * (1 << 20))
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, args.checkpoint_file)


class CheckpointThread:
    """--checkpoint-thread: write_checkpoint() on a daemon thread, holding `lock`, each time
    request() is called; the main thread takes `lock` every step."""

    def __init__(self, args):
        self.args, self.lock, self.wanted = args, threading.Lock(), threading.Event()
        threading.Thread(target=self.run, name="ckpt-writer", daemon=True).start()

    def run(self):
        while True:
            self.wanted.wait()
            self.wanted.clear()
            with self.lock:
                write_checkpoint(self.args)

    def request(self):
        self.wanted.set()


def run_program(args):
    """The main thread runs a separate program (a new interpreter with its own command line, not
    a fork of this one) that computes --wait-program-ms of CPU, and waits for it to exit."""
    code = ("import time\nend = time.monotonic() + %f\nwhile time.monotonic() < end:\n    pass\n"
            % (args.wait_program_ms / 1000))
    subprocess.run([sys.executable, "-S", "-c", code], check=True)


def train(args, rt, kernels, workers, state, helper=None):
    vp = ctypes.c_void_p
    stream = None  # the legacy default stream, as PyTorch uses by default
    kernel_ns = ctypes.c_uint64(int(args.kernel_us * 1000))
    loss = ctypes.c_float(0.0)
    pending = []  # (worker, slot, event or None): pinned slots the device may still read
    slot_events = {}  # (worker index, slot) -> cudaEvent_t, created on first use
    ckpt_thread = (CheckpointThread(args)
                   if args.checkpoint_file and args.checkpoint_thread else None)
    start = time.monotonic()
    step = 0
    while True:
        if args.steps and step >= args.steps:
            break
        if args.duration and time.monotonic() - start >= args.duration:
            break
        syncs_this_step = ((args.sync_every and (step + 1) % args.sync_every == 0)
                           or (args.dtoh_every and (step + 1) % args.dtoh_every == 0))
        # 1. Next batch, in order.
        if workers:
            w = workers[step % len(workers)]
            # A worker whose slots are all still being copied from cannot produce.
            while sum(1 for p in pending if p[0] is w) >= args.prefetch:
                oldest = next(p for p in pending if p[0] is w)
                check(rt, rt.cudaEventSynchronize(oldest[2]), "cudaEventSynchronize")
                os.write(w["free_w"], struct.pack("=I", oldest[1]))
                pending.remove(oldest)
            msg = read_message(w["data_r"])
            if msg is None:
                print("train_loop.py: a data worker exited", file=sys.stderr)
                break
            slot = msg[0]
            batch_addr = w["base"] + slot * args.batch_bytes
        elif args.main_thread_batches:
            build_batch_on_main_thread(args, state["local"], step)
            w, slot, batch_addr = None, 0, state["local"]
        else:
            produce_batch(args, state["local"], None, None, None, step)
            w, slot, batch_addr = None, 0, state["local"]
        # 2. Host to device: pinned slots are copied asynchronously; pageable ones are staged
        # by the driver on this thread.
        scratch = vp()
        if args.malloc_per_step:
            check(rt, rt.cudaMalloc(ctypes.byref(scratch), args.batch_bytes), "cudaMalloc")
        cached = [vp() for _ in range(args.empty_cache)]  # the step's activations, uncached
        for buf in cached:
            check(rt, rt.cudaMalloc(ctypes.byref(buf), int(args.empty_cache_mb * (1 << 20))),
                  "cudaMalloc")
        check(rt, rt.cudaMemcpyAsync(state["d_batch"], batch_addr, args.batch_bytes, HOST_TO_DEVICE, stream), "cudaMemcpyAsync")
        if w is not None and not args.pinned:
            os.write(w["free_w"], struct.pack("=I", slot))  # already copied
        elif w is not None:
            event = None
            if not syncs_this_step:
                key = (workers.index(w), slot)
                if key not in slot_events:
                    slot_events[key] = vp()
                    check(rt, rt.cudaEventCreate(ctypes.byref(slot_events[key])), "cudaEventCreate")
                event = slot_events[key]
                check(rt, rt.cudaEventRecord(event, stream), "cudaEventRecord")
            pending.append((w, slot, event))
        # 3. K kernels (--helper-thread: the backward half on the helper thread, while this
        # thread waits for it).
        forward = args.kernels_per_step
        if helper:
            forward -= args.kernels_per_step // 2
        for k in range(forward):
            stub, grid, block = kernels.entries[k % len(kernels.entries)]
            params = (vp * 3)(ctypes.addressof(kernel_ns), ctypes.addressof(state["d_batch"]), ctypes.addressof(state["d_loss"]))
            check(rt, rt.cudaLaunchKernel(stub, grid, block, params, 0, stream), "cudaLaunchKernel")
        if helper:
            helper.run_backward(forward, args.kernels_per_step)
        if args.malloc_per_step:
            check(rt, rt.cudaFree(scratch), "cudaFree")
        for buf in cached:  # empty_cache(): the cached blocks handed back to the driver
            check(rt, rt.cudaFree(buf), "cudaFree")
        step += 1
        if args.poll_sleep_ms:
            time.sleep(args.poll_sleep_ms / 1000)
        # 4. Synchronize, and read the loss back now and then (loss.item()).
        synced = False
        if args.sync_every and step % args.sync_every == 0:
            check(rt, rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
            synced = True
        if args.dtoh_every and step % args.dtoh_every == 0:
            check(rt, rt.cudaMemcpyAsync(ctypes.addressof(loss), state["d_loss"], 4, DEVICE_TO_HOST, stream), "cudaMemcpyAsync DtoH")
            check(rt, rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize loss")
            synced = True
        if synced:  # every copy so far is complete
            for pw, pslot, _ in pending:
                os.write(pw["free_w"], struct.pack("=I", pslot))
            pending.clear()
        if ckpt_thread is not None:
            with ckpt_thread.lock:  # hand the step's metrics over
                pass
            if step % args.checkpoint_every == 0:
                ckpt_thread.request()
        elif args.checkpoint_file and step % args.checkpoint_every == 0:
            write_checkpoint(args)
        if args.main_sleep_ms:
            time.sleep(args.main_sleep_ms / 1000)
        if args.wait_program_every and step % args.wait_program_every == 0:
            run_program(args)
        state["steps"] = step
    check(rt, rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    state["seconds"] = time.monotonic() - start


def main(argv):
    args = parse_args(argv)
    if args.io_file:
        try:
            os.close(os.open(args.io_file, os.O_RDONLY | (os.O_DIRECT if args.odirect else 0)))
        except OSError as e:
            sys.exit(f"train_loop.py: open --io-file {args.io_file}: {e.strerror}")
    rt = load_runtime(args.lib_dir)
    kernels = Kernels(rt)
    count = ctypes.c_int(0)
    check(rt, rt.cudaGetDeviceCount(ctypes.byref(count)), "cudaGetDeviceCount")
    check(rt, rt.cudaSetDevice(0), "cudaSetDevice")
    state = {"d_batch": ctypes.c_void_p(), "d_loss": ctypes.c_void_p(), "pinned": None,
             "local": None, "steps": 0, "seconds": 0.0}
    check(rt, rt.cudaMalloc(ctypes.byref(state["d_batch"]), args.batch_bytes), "cudaMalloc")
    check(rt, rt.cudaMalloc(ctypes.byref(state["d_loss"]), 256), "cudaMalloc loss")
    check(rt, rt.cudaMemset(state["d_loss"], 0, 256), "cudaMemset")
    if args.workers == 0 and args.pinned:  # the main process produces into pinned memory
        pinned = ctypes.c_void_p()
        check(rt, rt.cudaMallocHost(ctypes.byref(pinned), args.batch_bytes), "cudaMallocHost")
        state["pinned"] = state["local"] = pinned.value
    elif args.workers == 0:
        state["pageable"] = ctypes.create_string_buffer(args.batch_bytes)
        state["local"] = ctypes.addressof(state["pageable"])

    def on_stop(signum, frame):
        raise StopRequested()

    workers = start_workers(args)
    # Threads start after the workers are forked (a forked child has only the forking thread).
    helper = None
    if args.helper_thread and not args.neighbour:
        helper = BackwardThread(args, rt, kernels, state)
    if args.pinned:
        # Page-lock the shared batch slots (pin_memory), so copies out of them are async DMA.
        for w in workers:
            check(rt, rt.cudaHostRegister(w["base"], args.prefetch * args.batch_bytes, 0), "cudaHostRegister")
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    gil = start_gil_thread(args) if args.gil_thread else None
    start = time.monotonic()
    rc = 0
    try:
        if args.neighbour:
            neighbour(args, rt, kernels, state)
        else:
            train(args, rt, kernels, workers, state, helper)
    except StopRequested:
        state["seconds"] = time.monotonic() - start
    except CudaError as e:
        print(f"train_loop.py: {e}", file=sys.stderr)
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if gil is not None:
            gil["spin"] = False
        if helper is not None:
            helper.stop()
        stop_workers(workers)
    rt.cudaDeviceSynchronize()
    if args.pinned:
        for w in workers:
            rt.cudaHostUnregister(w["base"])
    if state["pinned"]:
        rt.cudaFreeHost(state["pinned"])
    rt.cudaFree(state["d_batch"])
    rt.cudaFree(state["d_loss"])
    if args.report:
        seconds = state["seconds"]
        sps = state["steps"] / seconds if seconds > 0 else 0.0
        print(f"gw_train_loop: steps={state['steps']} seconds={seconds:.3f} "
              f"steps_per_s={sps:.2f} samples_per_s={sps * args.batch_size:.1f}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
