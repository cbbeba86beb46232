"""A GPU-bound PyTorch training loop with one fault that can be switched on and off while it runs.

The workload behind bench/gpu/accuracy.py (issue 11 item 7). A transformer encoder (TF32
matmuls; d_model 1024, 6 layers, batch 32 x 256 tokens by default, so the GPU, not the Python
thread, sets the pace) trains on synthetic token batches from a DataLoader
(num_workers=4, pin_memory=True, persistent_workers=True). Every step ends with
torch.cuda.synchronize() and appends its end time (CLOCK_MONOTONIC ns) to --log.

The fault named by --fault is active while the file --control exists (checked every step by the
trainer and at most every 0.2 s by each worker), so one process gives both a healthy and a
faulted phase. A line "# fault on NS" / "# fault off NS" goes to --log when the trainer sees
the switch.

  healthy          nothing (the control file is ignored)
  cpu-contention   the trainer itself starts --burners busy-loop processes with
                   subprocess.Popen (exec'd children, each pinned to one of the trainer's CPUs;
                   run the trainer with --cpus 0-3)
  slow-worker      DataLoader worker 0 burns --slow-worker-ms of CPU per batch (use few workers)
  pageable-memcpy  every step also copies --pageable-mb of pageable host memory to the GPU
                   synchronously (x.to(dev), non_blocking=False, not pinned)
  sync-heavy       .item() after every encoder block and on every parameter's grad norm
  malloc-churn     torch.cuda.empty_cache() after every step
  io-bottleneck    each sample also costs --io-reads random --io-read-kb reads of --io-file
                   (O_DIRECT with an aligned mmap buffer; --io-mode fadvise: page cache dropped
                   with posix_fadvise(DONTNEED) before each batch instead); --io-cgroup DIR
                   (a throttled group: cgroup v1 blkio or v2 io) is joined by each worker when
                   the fault starts
  gil-thread       a daemon thread of the trainer (gil_hog) loops on pure-Python integer
                   arithmetic, holding the GIL except when CPython's switch interval takes it
  main-thread-batches
                   num_workers=0 semantics: the main loop leaves the loader alone and builds
                   each batch on the main thread (dataset[i] for the batch, each sample
                   --main-batch-cpu-ms of extra Python CPU, torch.stack, pin_memory())
  tiny-kernels     the step is a separate deep, narrow MLP (--tiny-layers x Linear(--tiny-width)
                   + ReLU, batch --tiny-batch) forward + backward + AdamW instead of the
                   transformer: the GPU waits for the host's kernel launches
  gpu-neighbour    the trainer starts a separate Python process (subprocess.Popen, own session,
                   killed with the trainer) doing bf16 --neighbour-n square matmuls on the same
                   GPU, synchronizing every 4
  checkpoint       every --ckpt-every-s s of training the main thread torch.save()s a
                   --ckpt-mb MiB state dict into --ckpt-dir, os.fsync()s it and deletes the
                   previous one
  locked-checkpoint
                   the same checkpoint, written by a background thread of the trainer that
                   holds a lock while it saves and fsyncs; the training loop takes that lock
                   every step (to hand over its metrics), so it waits for the write
  worker-oversubscription
                   each worker runs torch.set_num_threads(--oversub-threads) and does
                   --oversub-matmuls 256x256 matmuls per sample (run the trainer with --cpus
                   0-3: 4 workers x 16 intra-op threads on 4 cores)
  gpu-bound        (a control, no host fault) the transformer step runs 3 times per batch
  poll-sleep       each step, after queuing its kernels, the main thread checks for a flag file
                   and time.sleep()s --poll-ms ms (a polling throttle)
  eval-subprocess  every --eval-every-s s of training the main thread runs a separate program
                   (python3 -c, --eval-ms ms of CPU) with subprocess.run and waits for it (a
                   synchronous eval or upload script)
  network-loader   each sample is fetched over TCP from a sample server the trainer starts
                   (127.0.0.1, one thread per connection, the reply sent --net-ms ms after
                   the request): workers wait on the network, not computing, not on disk
  cpu-quota        the trainer and each worker move themselves into the cgroup v2 group
                   --quota-cgroup (made by the caller, cpu.max set) and back when it goes off
  fresh-memory     each sample, a worker maps --fresh-mb MiB of fresh anonymous memory, writes
                   every page of it and unmaps it (a decode buffer made anew per sample, as
                   glibc does for allocations above its mmap threshold): the workers' CPU time
                   goes to page faults in the kernel

Usage: python torch_faults.py --log steps.txt --control FILE --fault NAME [--duration 120]
"""
import argparse
import mmap
import os
import random
import signal
import subprocess
import sys
import threading
import time

FAULTS = ("healthy", "cpu-contention", "slow-worker", "pageable-memcpy", "sync-heavy",
          "malloc-churn", "io-bottleneck", "gil-thread", "main-thread-batches", "tiny-kernels",
          "gpu-neighbour", "checkpoint", "worker-oversubscription", "gpu-bound", "cpu-quota",
          "poll-sleep", "eval-subprocess", "network-loader", "locked-checkpoint",
          "fresh-memory")
GPU_BOUND_REPEAT = 3  # transformer steps per loader batch while gpu-bound is on
CKPT_PREFIX = "gpuwhy_ckpt_"  # checkpoint files: CKPT_PREFIX + "<pid>_<n>.pt"

# The gpu-neighbour process: its own CUDA context on the trainer's GPU, big bf16 matmuls. It
# asks for SIGKILL when the trainer dies (PR_SET_PDEATHSIG), so a killed trainer leaves none.
# The marker on the first line lets a controller find a stray one by its command line.
NEIGHBOUR_CODE = r"""# gpuwhy-accuracy gpu-neighbour
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the trainer died before prctl took effect
n, sync_every = int(sys.argv[2]), int(sys.argv[3])
import torch
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
while True:
    for _ in range(sync_every):
        c = a @ b
    torch.cuda.synchronize()
"""

# The network-loader's sample server: one thread per connection, each 4-byte request answered
# with 4 KiB after --net-ms ms (a remote object store's latency). Prints its port; dies with the
# trainer (PR_SET_PDEATHSIG) and carries the same marker as the neighbour for clean-up.
NET_SERVER_CODE = r"""# gpuwhy-accuracy gpu-neighbour (sample server)
import ctypes, os, signal, socket, sys, threading, time
ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
delay = float(sys.argv[2]) / 1000
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print(srv.getsockname()[1], flush=True)
reply = b"s" * 4096
def serve(c):
    with c:
        while len(c.recv(4)) == 4:
            time.sleep(delay)
            c.sendall(reply)
while True:
    threading.Thread(target=serve, args=(srv.accept()[0],), daemon=True).start()
"""


def fetch_sample(state, port):
    """network-loader: one request to the sample server, its 4 KiB reply read whole."""
    import socket
    if state.get("sock") is None:
        state["sock"] = socket.create_connection(("127.0.0.1", port))
    s = state["sock"]
    s.sendall(b"next")
    left = 4096
    while left > 0:
        chunk = s.recv(left)
        if not chunk:
            raise ConnectionError("the sample server closed the connection")
        left -= len(chunk)


def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return sorted(cpus)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--control", required=True, help="the fault is on while this file exists")
    p.add_argument("--fault", choices=FAULTS, default="healthy")
    p.add_argument("--duration", type=float, default=120, help="stop after this many seconds")
    p.add_argument("--cpus", default="", help="pin the trainer (and so its children) to these CPUs")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--no-tf32", action="store_true", help="full fp32 matmuls (slower GPU steps)")
    p.add_argument("--cpu-work", type=int, default=500, help="loop iterations per sample")
    p.add_argument("--burners", type=int, default=12)
    p.add_argument("--slow-worker-ms", type=float, default=300, help="worker 0 CPU ms per batch")
    p.add_argument("--pageable-mb", type=int, default=1024)
    p.add_argument("--io-file", default="")
    p.add_argument("--io-mode", choices=("odirect", "fadvise"), default="odirect")
    p.add_argument("--io-reads", type=int, default=48, help="random reads per sample")
    p.add_argument("--io-read-kb", type=int, default=16)
    p.add_argument("--io-cgroup", default="", help="cgroup dir (v1 blkio or v2) the workers join")
    # The default is about the GPU's step time per batch at the default shape (32 x 1 ms
    # against ~34 ms a step on an H200), so building batches on the main thread slows the loop
    # about 2x.
    p.add_argument("--main-batch-cpu-ms", type=float, default=1.0,
                   help="main-thread-batches: extra Python CPU ms per sample")
    p.add_argument("--tiny-layers", type=int, default=48)
    p.add_argument("--tiny-width", type=int, default=64)
    p.add_argument("--tiny-batch", type=int, default=16)
    p.add_argument("--neighbour-n", type=int, default=8192, help="gpu-neighbour matmul size")
    p.add_argument("--neighbour-sync-every", type=int, default=4)
    p.add_argument("--ckpt-dir", default="/var/tmp")
    p.add_argument("--ckpt-mb", type=int, default=512)
    p.add_argument("--ckpt-every-s", type=float, default=2.0,
                   help="s of training between the end of one checkpoint and the next")
    p.add_argument("--poll-ms", type=float, default=15.0,
                   help="poll-sleep: ms slept each step")
    p.add_argument("--eval-every-s", type=float, default=1.0,
                   help="eval-subprocess: s of training between the end of one run and the next")
    p.add_argument("--eval-ms", type=float, default=300.0,
                   help="eval-subprocess: the program's CPU time in ms")
    p.add_argument("--net-ms", type=float, default=10.0,
                   help="network-loader: the sample server's delay per request in ms")
    p.add_argument("--oversub-threads", type=int, default=16,
                   help="worker-oversubscription: intra-op threads per worker")
    # 8: on 4 cores of the H200 host the same work with one thread per worker costs nothing
    # (28.6 -> 28.0 steps/s), with 16 it halves the loop (28.4 -> 14.7); 16 matmuls would be
    # too much work even on one thread (28.6 -> 15.7), a starved loader rather than threads.
    p.add_argument("--oversub-matmuls", type=int, default=8,
                   help="worker-oversubscription: 256x256 matmuls per sample")
    p.add_argument("--quota-cgroup", default="", help="cpu-quota: cgroup v2 dir to move into")
    p.add_argument("--fresh-mb", type=int, default=16,
                   help="fresh-memory: MiB of fresh memory a worker faults in per sample")
    return p.parse_args(argv)


class Switch:
    """Whether the control file exists, re-checked at most every `every` seconds."""

    def __init__(self, path, every):
        self.path, self.every, self.t, self.on = path, every, 0.0, False

    def __call__(self):
        now = time.monotonic()
        if now - self.t >= self.every:
            self.t = now
            self.on = os.path.exists(self.path)
        return self.on


def burn_cpu_ms(ms):
    end = time.thread_time() + ms / 1000.0
    x = 1
    while time.thread_time() < end:
        for _ in range(2000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def gil_hog(stop):
    """The gil-thread fault's loop: pure-Python integer arithmetic with no call that releases the
    GIL, so every other thread of the process gets it only when CPython's switch interval (5 ms)
    forces a hand-over. Runs until `stop` is set."""
    x = 1
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


class FaultThread:
    """Starts and stops a daemon thread that runs target(stop_event) until the event is set."""

    def __init__(self, target, name, join_s=5):
        self.target, self.name, self.join_s = target, name, join_s
        self.stop_event, self.thread = None, None

    def start(self):
        if self.thread is None:
            self.stop_event = threading.Event()
            self.thread = threading.Thread(target=self.target, args=(self.stop_event,),
                                           name=self.name, daemon=True)
            self.thread.start()

    def stop(self):
        if self.thread is not None:
            self.stop_event.set()
            self.thread.join(timeout=self.join_s)
            self.thread = None


def GilHog():
    """The gil-thread fault's thread, running gil_hog()."""
    return FaultThread(gil_hog, "gil-hog")


class LockedSaver(FaultThread):
    """The locked-checkpoint fault: a daemon thread that runs `ckpt.maybe_save()` every 20 ms
    holding `lock`, which the training loop takes every step."""

    def __init__(self, ckpt):
        super().__init__(self.run, "ckpt-saver", join_s=30)
        self.ckpt, self.lock = ckpt, threading.Lock()

    def run(self, stop):
        while not stop.wait(0.02):
            with self.lock:
                self.ckpt.maybe_save()

    def stop(self):
        super().stop()
        self.ckpt.reset()


class Checkpointer:
    """The checkpoint fault: `save(f)` writes a checkpoint into a new file in `directory` once
    `every_s` seconds of training have passed since the last one ended, the file is fsync()ed and
    the previous one deleted. On the calling (main) thread, as a training loop's checkpoint is."""

    def __init__(self, directory, every_s, save):
        self.dir, self.every_s, self.save = directory, every_s, save
        self.last, self.prev, self.n = None, None, 0

    def maybe_save(self):
        now = time.monotonic()
        if self.last is None:
            self.last = now  # the first checkpoint after every_s s of faulted training
        if now - self.last < self.every_s:
            return False
        path = os.path.join(self.dir, f"{CKPT_PREFIX}{os.getpid()}_{self.n}.pt")
        self.n += 1
        try:
            with open(path, "wb") as f:
                self.save(f)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:  # stopped (SIGINT) halfway: no partial checkpoint left behind
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        self.remove_prev()
        self.prev = path
        self.last = time.monotonic()
        return True

    def remove_prev(self):
        if self.prev:
            try:
                os.unlink(self.prev)
            except OSError:
                pass
            self.prev = None

    def reset(self):
        """Fault off: the next checkpoint comes every_s s after the fault is on again."""
        self.last = None


class CgroupMover:
    """The cpu-quota fault: moves this process (all its threads) into a cgroup v2 group while the
    fault is on and back into the group it came from when it goes off. The group, with its
    cpu.max, is made and removed by the caller (accuracy.py)."""

    ROOT = "/sys/fs/cgroup"

    def __init__(self, path):
        self.path, self.inside, self.home, self.failed = path, False, None, False

    @classmethod
    def own_group(cls):
        try:
            with open("/proc/self/cgroup") as f:
                for line in f:
                    if line.startswith("0::"):
                        return os.path.join(cls.ROOT, line[3:].strip().lstrip("/"))
        except OSError:
            pass
        return cls.ROOT

    def sync(self, on):
        if on == self.inside or self.failed:
            return
        if on:
            self.home = self.own_group()
        target = self.path if on else self.home
        try:
            with open(os.path.join(target, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:  # said once; the loop goes on unthrottled
            print(f"torch_faults: pid {os.getpid()} joining {target}: {e}", file=sys.stderr)
            self.failed = True
            return
        self.inside = on


class IoReader:
    """Random reads of the dataset file, O_DIRECT into an aligned buffer, or buffered reads after
    dropping the file's page cache."""

    def __init__(self, args):
        self.args = args
        self.size = args.io_read_kb * 1024
        self.fd = None
        self.rng = random.Random(os.getpid())
        self.joined = False

    def open(self):
        flags = os.O_RDONLY | (os.O_DIRECT if self.args.io_mode == "odirect" else 0)
        self.fd = os.open(self.args.io_file, flags)
        self.blocks = max(1, os.fstat(self.fd).st_size // self.size)
        self.buf = mmap.mmap(-1, self.size)  # page-aligned, as O_DIRECT needs
        if self.args.io_mode == "fadvise":
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)

    def sample(self):
        if self.fd is None:
            self.open()
        if self.args.io_cgroup and not self.joined:
            self.joined = True
            try:
                with open(os.path.join(self.args.io_cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError as e:
                print(f"torch_faults: joining {self.args.io_cgroup}: {e}", file=sys.stderr)
        if self.args.io_mode == "fadvise":
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        for _ in range(self.args.io_reads):
            os.preadv(self.fd, [self.buf], self.rng.randrange(self.blocks) * self.size)


class SyntheticTokens:
    """Map-style dataset of random token sequences; each sample costs a little CPU (decoding).
    Module level and torch-free until used, so it pickles under any start method."""

    def __init__(self, args):
        self.args = args
        self.switch = None
        self.io = None
        self.quota = None
        self.oversubscribed = False
        self.net = {}  # network-loader: this worker's connection to the sample server

    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        import torch
        from torch.utils.data import get_worker_info
        a = self.args
        info = get_worker_info()  # None on the main thread (main-thread-batches)
        if self.switch is None:  # first call in this worker process
            self.switch = Switch(a.control, 0.2)
            self.io = IoReader(a) if a.fault == "io-bottleneck" and a.io_file else None
            if a.fault == "cpu-quota" and a.quota_cgroup and info is not None:
                self.quota = CgroupMover(a.quota_cgroup)
        on = a.fault != "healthy" and self.switch()
        if on and a.fault == "slow-worker":
            if info is not None and info.id == 0:
                burn_cpu_ms(a.slow_worker_ms / a.batch)
        if on and self.io is not None:
            self.io.sample()
        if on and a.fault == "network-loader" and a.net_port:
            fetch_sample(self.net, a.net_port)
        if self.quota is not None:
            self.quota.sync(on)
        if a.fault == "worker-oversubscription" and info is not None:
            self.oversubscribe(torch, on)
        if on and a.fault == "fresh-memory":
            fault_in_fresh_memory(a.fresh_mb << 20)
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, a.vocab, (a.seq,), generator=g)
        acc = 0
        for k in range(a.cpu_work):  # per-sample CPU work, like decoding
            acc += (k * i) % 7
        return x, (x + acc) % a.vocab

    def oversubscribe(self, torch, on):
        """worker-oversubscription: a worker's intra-op pool sized for the whole machine (the
        DataLoader sets it to 1 in workers) and CPU ops that use it, on every sample."""
        if on != self.oversubscribed:
            torch.set_num_threads(self.args.oversub_threads if on else 1)
            self.oversubscribed = on
        if on:
            m = torch.rand(256, 256)
            for _ in range(self.args.oversub_matmuls):
                m = torch.tanh(m @ m)


def fault_in_fresh_memory(size):
    """fresh-memory: map `size` bytes anew, write one byte in every 4 KiB page (each write a page
    fault: the kernel finds, zeroes and maps a page) and unmap it."""
    buf = mmap.mmap(-1, size)
    pages = size // 4096
    buf[::4096] = b"\x01" * pages
    buf.close()


def main_thread_batch(dataset, first, n, cpu_ms):
    """main-thread-batches: one batch as DataLoader(num_workers=0, pin_memory=True) builds it, on
    the calling thread: n samples, each with cpu_ms of extra Python CPU (decoding, augmentation),
    stacked and pinned."""
    import torch
    xs, ys = [], []
    for i in range(first, first + n):
        x, y = dataset[i]
        burn_cpu_ms(cpu_ms)
        xs.append(x)
        ys.append(y)
    return torch.stack(xs).pin_memory(), torch.stack(ys).pin_memory()


class SideEffects:
    """The faults that start or stop something when the switch flips: the cpu-contention burner
    processes, the gpu-neighbour process, the gil-thread thread and the cpu-quota cgroup move.
    close() stops whatever is running."""

    def __init__(self, args):
        self.args = args
        self.cpus = sorted(os.sched_getaffinity(0))
        self.procs = []
        self.gil = GilHog() if args.fault == "gil-thread" else None
        self.quota = (CgroupMover(args.quota_cgroup)
                      if args.fault == "cpu-quota" and args.quota_cgroup else None)

    def set(self, on):
        a = self.args
        if a.fault == "cpu-contention" and on:
            for k in range(a.burners):
                cpu = self.cpus[k % len(self.cpus)]
                code = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
                self.procs.append(subprocess.Popen([sys.executable, "-c", code],
                                                   stderr=subprocess.DEVNULL))
        elif a.fault == "gpu-neighbour" and on:
            # Its own session, so it is not in the trainer's process group; still the trainer's
            # child (accuracy.py's clean-up finds it as a descendant) and killed with it.
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", NEIGHBOUR_CODE, str(os.getpid()), str(a.neighbour_n),
                 str(a.neighbour_sync_every)], stdout=subprocess.DEVNULL,
                start_new_session=True))
        elif a.fault in ("cpu-contention", "gpu-neighbour"):
            self.stop_procs()
        elif self.gil is not None and on:
            self.gil.start()
        elif self.gil is not None:
            self.gil.stop()
        elif self.quota is not None:
            self.quota.sync(on)

    def stop_procs(self):
        for b in self.procs:
            if b.poll() is None:
                b.kill()
        for b in self.procs:
            try:
                b.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()

    def close(self):
        self.stop_procs()
        if self.gil is not None:
            self.gil.stop()


def main(argv=None):
    args = parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, parse_cpus(args.cpus))
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader

    fault = args.fault

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            d = args.d_model
            self.emb = nn.Embedding(args.vocab, d)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(d, max(1, d // 64), 4 * d, batch_first=True,
                                           norm_first=True) for _ in range(args.layers))
            self.out = nn.Linear(d, args.vocab)

        def forward(self, x, probe=False):
            h = self.emb(x)
            for b in self.blocks:
                h = b(h)
                if probe:  # the anti-pattern: read an activation statistic back every block
                    _ = h.detach().float().abs().mean().item()
            return self.out(h)

    if not args.no_tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Model().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    net_server = None
    args.net_port = 0
    if fault == "network-loader":  # started before the workers, who inherit its port
        net_server = subprocess.Popen(
            [sys.executable, "-c", NET_SERVER_CODE, str(os.getpid()), str(args.net_ms)],
            stdout=subprocess.PIPE, start_new_session=True)
        args.net_port = int(net_server.stdout.readline())
    dataset = SyntheticTokens(args)
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                        pin_memory=True, persistent_workers=args.workers > 0, shuffle=False)
    pageable = None
    if fault == "pageable-memcpy":  # ordinary (pageable) host memory, touched once
        pageable = torch.ones(args.pageable_mb * (1 << 20) // 4, dtype=torch.float32)
    tiny_step = None
    if fault == "tiny-kernels":  # made up front: the switch only chooses which step runs
        w = args.tiny_width
        tiny = nn.Sequential(*[m for _ in range(args.tiny_layers)
                               for m in (nn.Linear(w, w), nn.ReLU())]).to(dev)
        tiny_opt = torch.optim.AdamW(tiny.parameters(), lr=1e-4)
        tiny_x = torch.randn(args.tiny_batch, w, device=dev)
        tiny_y = torch.randn(args.tiny_batch, w, device=dev)

        def tiny_step():
            tiny_opt.zero_grad(set_to_none=True)
            nn.functional.mse_loss(tiny(tiny_x), tiny_y).backward()
            tiny_opt.step()
    ckpt = saver = None
    if fault in ("checkpoint", "locked-checkpoint"):  # a --ckpt-mb MiB state dict, touched once
        blob = torch.full((args.ckpt_mb << 20,), 0x5A, dtype=torch.uint8)
        state = {"step": 0, "blob": blob}

        def save(f):
            torch.save(state, f)
        ckpt = Checkpointer(args.ckpt_dir, args.ckpt_every_s, save)
        if fault == "locked-checkpoint":
            saver, ckpt = LockedSaver(ckpt), None

    def train_step(x, y, on):
        """One transformer step with the per-step faults that live inside it."""
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x, probe=on and fault == "sync-heavy").view(-1, args.vocab),
                       y.view(-1))
        if on and pageable is not None:
            big = pageable.to(dev, non_blocking=False)  # staged, synchronous
            loss = loss + big[:1].sum() * 0
        loss.backward()
        if on and fault == "sync-heavy":  # per-parameter grad-norm logging
            for prm in model.parameters():
                _ = prm.grad.norm().item()
        opt.step()
        if on and fault == "malloc-churn":
            del loss
            torch.cuda.empty_cache()

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    switch = Switch(args.control, 0.0)
    side = SideEffects(args)
    was_on = False
    last_eval = None  # eval-subprocess: when the last run ended (None: the fault just went on)
    deadline = time.monotonic() + args.duration
    next_sample = len(dataset) // 2  # main-thread batches: indices the loader has not reached
    try:
        with open(args.log, "w", buffering=1) as log:
            log.write(f"# pid {os.getpid()} fault {fault} batch {args.batch} "
                      f"d_model {args.d_model} layers {args.layers} cpus {args.cpus or 'all'}\n")
            batches = iter(loader)
            while True:
                on = fault != "healthy" and switch()
                if on != was_on:
                    log.write(f"# fault {'on' if on else 'off'} {time.monotonic_ns()}\n")
                    was_on = on
                    side.set(on)
                    if ckpt is not None and not on:
                        ckpt.reset()
                    if saver is not None:
                        saver.start() if on else saver.stop()
                if on and tiny_step is not None:
                    tiny_step()  # instead of the transformer; the loader is left alone
                else:
                    if on and fault == "main-thread-batches":  # the loader is left alone
                        x, y = main_thread_batch(dataset, next_sample, args.batch,
                                                 args.main_batch_cpu_ms)
                        next_sample += args.batch
                    else:
                        try:
                            x, y = next(batches)
                        except StopIteration:
                            break
                    x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                    for _ in range(GPU_BOUND_REPEAT if on and fault == "gpu-bound" else 1):
                        train_step(x, y, on)
                if on and ckpt is not None:
                    state["step"] += 1
                    ckpt.maybe_save()
                if on and saver is not None:
                    with saver.lock:  # hand over the step's metrics
                        state["step"] += 1
                if on and fault == "poll-sleep":
                    os.path.exists(args.control + ".stop")  # the flag it polls for
                    time.sleep(args.poll_ms / 1000)
                if on and fault == "eval-subprocess":
                    if last_eval is None:
                        last_eval = time.monotonic()
                    elif time.monotonic() - last_eval >= args.eval_every_s:
                        code = (f"import time\nend = time.monotonic() + {args.eval_ms / 1000}\n"
                                "while time.monotonic() < end: pass")
                        subprocess.run([sys.executable, "-c", code], check=True)
                        last_eval = time.monotonic()
                elif not on:
                    last_eval = None
                torch.cuda.synchronize()
                log.write(f"{time.monotonic_ns()}\n")
                if time.monotonic() > deadline:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        side.close()
        if saver is not None:
            saver.stop()
            saver.ckpt.remove_prev()
        if ckpt is not None:
            ckpt.remove_prev()
        if net_server is not None:
            net_server.kill()
            net_server.wait()


if __name__ == "__main__":
    main()
