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
                   (a cgroup v1 blkio group) is joined by each worker when the fault starts

Usage: python torch_faults.py --log steps.txt --control FILE --fault NAME [--duration 120]
"""
import argparse
import mmap
import os
import random
import signal
import subprocess
import sys
import time

FAULTS = ("healthy", "cpu-contention", "slow-worker", "pageable-memcpy", "sync-heavy",
          "malloc-churn", "io-bottleneck")


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
    p.add_argument("--io-cgroup", default="", help="cgroup v1 blkio dir the workers join")
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

    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        import torch
        from torch.utils.data import get_worker_info
        a = self.args
        if self.switch is None:  # first call in this worker process
            self.switch = Switch(a.control, 0.2)
            self.io = IoReader(a) if a.fault == "io-bottleneck" and a.io_file else None
        on = a.fault != "healthy" and self.switch()
        if on and a.fault == "slow-worker":
            info = get_worker_info()
            if info is not None and info.id == 0:
                burn_cpu_ms(a.slow_worker_ms / a.batch)
        if on and self.io is not None:
            self.io.sample()
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, a.vocab, (a.seq,), generator=g)
        acc = 0
        for k in range(a.cpu_work):  # per-sample CPU work, like decoding
            acc += (k * i) % 7
        return x, (x + acc) % a.vocab


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
    loader = DataLoader(SyntheticTokens(args), batch_size=args.batch, num_workers=args.workers,
                        pin_memory=True, persistent_workers=args.workers > 0, shuffle=False)
    pageable = None
    if fault == "pageable-memcpy":  # ordinary (pageable) host memory, touched once
        pageable = torch.ones(args.pageable_mb * (1 << 20) // 4, dtype=torch.float32)
    burners = []

    def stop_burners():
        for b in burners:
            if b.poll() is None:
                b.kill()
        for b in burners:
            try:
                b.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        burners.clear()

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    switch = Switch(args.control, 0.0)
    cpus = sorted(os.sched_getaffinity(0))
    was_on = False
    deadline = time.monotonic() + args.duration
    try:
        with open(args.log, "w", buffering=1) as log:
            log.write(f"# pid {os.getpid()} fault {fault} batch {args.batch} "
                      f"d_model {args.d_model} layers {args.layers} cpus {args.cpus or 'all'}\n")
            for x, y in loader:
                on = fault != "healthy" and switch()
                if on != was_on:
                    log.write(f"# fault {'on' if on else 'off'} {time.monotonic_ns()}\n")
                    was_on = on
                    if fault == "cpu-contention" and on:
                        for k in range(args.burners):
                            cpu = cpus[k % len(cpus)]
                            code = (f"import os; os.sched_setaffinity(0, {{{cpu}}})\n"
                                    "while True: pass")
                            burners.append(subprocess.Popen([sys.executable, "-c", code],
                                                          stderr=subprocess.DEVNULL))
                    elif fault == "cpu-contention":
                        stop_burners()
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
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
                torch.cuda.synchronize()
                log.write(f"{time.monotonic_ns()}\n")
                if time.monotonic() > deadline:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        stop_burners()


if __name__ == "__main__":
    main()
