"""Accuracy scenario suite on real PyTorch (issue 11 item 7): does `gpuwhy explain` name the
fault that was really injected, and stay quiet on a healthy job?

For every case one training process (bench/gpu/torch_faults.py) is started and left to warm
up; then, in the same process:
  1. healthy phase   (--healthy-s, untraced): steps/s of the loop without the fault;
  2. fault switched on (the control file is created), --settle-s to take effect; the steps/s
     of the last part of the settle phase are the untraced faulted rate;
  3. traced phase: `gpuwhy trace --duration Ns --db DIR/<case>.db --quiet` attached late, the
     fault present for the whole window (with --fault-onset S it is switched on S s into the
     window instead, so the window also holds a healthy stretch), NVML GPU utilisation sampled
     every 100 ms (pynvml in a child interpreter; optional) and /proc/diskstats read at both
     ends;
  4. the trainer and everything it started (its process group) are stopped, then
     `gpuwhy explain --json` and the text report are written next to the database.
steps/s over the traced window use the window explain reports (sessions.mono_start_ns +
window.from_ns/to_ns, the same CLOCK_MONOTONIC as the steps log).

Cases (expected rule, any of a set; "-": nothing above LOW):
  healthy          the loop as is                                        -
  cpu-contention   trainer pinned to --contention-cpus (0-3); it starts 12 busy-loop children
                   (subprocess.Popen, exec'd, each pinned to one of those CPUs)   cpu-contention
  slow-worker      2 workers; worker 0 burns 300 ms of CPU per batch          dataloader-starvation
  pageable-memcpy  1 GiB of pageable host memory copied to the GPU synchronously each step
                                                                              memcpy-bottleneck
  sync-heavy       .item() after every encoder block and every parameter's grad norm   sync-heavy
  malloc-churn     torch.cuda.empty_cache() every step          malloc-churn | allocator-spikes
  io-bottleneck    2 workers; each sample does 48 random 16 KiB O_DIRECT reads of a 1 GiB file
                   made at case start (dir: --io-dir, else the first of /var/tmp, /tmp, DIR on a
                   block-device file system); if O_DIRECT fails: posix_fadvise(DONTNEED) before
                   each batch + buffered reads. The workers join a group throttled to
                   --io-throttle-mbps of reads on that disk: cgroup v1 blkio, else cgroup v2
                   io.max rbps (+io enabled in the root's subtree_control for the case)
                                                                                io-bottleneck
  gil-thread       a daemon thread of the trainer loops on pure-Python integer arithmetic
                   (torch_faults.gil_hog), holding the GIL       lock-contention | gil-contention
  main-thread-batches
                   num_workers=0 semantics: the main loop builds each batch itself (32 x
                   dataset[i], each + --main-batch-cpu-ms of Python CPU, torch.stack,
                   pin_memory()), the loader left alone                         host-compute
  tiny-kernels     the step is a 48 x Linear(64,64)+ReLU MLP at batch 16 (forward, backward,
                   AdamW) instead of the transformer            host-compute | launch-bound
                   (no healthy equivalent: the reference is the GPU idle share, not a slowdown)
  gpu-neighbour    the trainer Popen()s a process (own session) doing bf16 8192x8192 matmuls
                   on the same GPU; settle phase at least 8 s (its CUDA start-up)  gpu-sharing
  checkpoint       every 2 s of training the main thread torch.save()s a 512 MiB state dict into
                   --io-dir (or the I/O case's choice of directory), fsync()s it and deletes
                   the previous one                                             main-thread-io
  worker-oversubscription
                   trainer and its 4 workers pinned to --contention-cpus (0-3); each worker
                   set_num_threads(16) and eight 256x256 matmuls per sample  cpu-oversubscription
  gpu-bound        (control) the transformer step runs 3 times per loader batch: nothing
                   above LOW and the report says GPU-bound (gpu_verdict or budget.gpu_bound)
                   (the reference is the GPU idle share, not a slowdown)
  cpu-quota        trainer and workers move themselves into the cgroup v2 group
                   /sys/fs/cgroup/gwacc-quota, cpu.max "50000 100000" (0.5 CPU), made at case
                   start (+cpu enabled in the parent's cgroup.subtree_control if needed) and
                   removed at its end; skipped where there is no cgroup v2 cpu controller
                                                                 cpu-quota
  poll-sleep       (control) each step, after queuing its kernels, the main thread time.sleep()s
                   15 ms: the GPU works through it (the syncs' since_work_ns prove it)      -
  eval-subprocess  every 1 s the main thread subprocess.run()s a python3 -c program computing
                   300 ms and waits for it                                   waits-for-program
  network-loader   each sample fetched over TCP (127.0.0.1) from a sample server answering
                   10 ms after each request: workers wait on the network
                                                               loader-waits | waits-for-program
  locked-checkpoint
                   the checkpoint's save, on a background thread of the trainer holding a
                   threading.Lock that the training loop takes every step
                                                            main-thread-io | lock-contention
  launched         (control) the healthy trainer started by `gpuwhy trace -- CMD`, running
                   --launch-job-s and exiting inside the window: nothing above LOW and
                   budget.startup_s > 0 (the imports and set-up before the first CUDA call
                   are outside the loop)                                              -
  fresh-memory     each sample, a worker maps 16 MiB of fresh memory, writes every page and
                   unmaps it: page faults in the workers (added 2026-12-07, not yet run on a GPU)
                                                                 dataloader-starvation
Lost time, per case: measured_lost_s = (1 - faulted / healthy steps/s) x the seconds of the
explain window the fault was present (traced faulted rate vs the untraced healthy phase),
explain_lost_s = the top finding's lost_s, and their ratio (expected_lost_s: the first finding
of an expected rule). tiny-kernels and gpu-bound have no healthy equivalent: measured_lost_s is
null and gpu_idle_share_pct (100 - mean NVML utilization over the window) stands in. The explain
JSON's `budget` object (GPU busy/idle split, lost seconds per cause) is copied as it is.
Outputs in DIR: summary.json, summary.md (table + findings, fixes and feed time per case),
<case>.db, <case>.explain.json/.txt, <case>.steps, <case>.train.log, <case>.trace.log,
<case>.nvml.txt, check.txt.

Time: per case ≈ warm-up 12 + healthy 6 + settle 3 + trace 20 (+ attach) + ~6 s stop/explain
≈ 50 s (gpu-neighbour ≈ 55 s; ≈ 40 s with --trace-seconds 15); all 19 cases ≈ 13–16 min, more
than the default --budget (530 s:
later cases are skipped and marked so). Every wait is bounded (--startup-timeout for the first
step, --trace-seconds + --attach-timeout for the tracer, 90 s for explain). To stay inside a
10-minute limit per call, run the suite in parts into one DIR with --merge (each call keeps the
other cases' results of the summary.json already there); --list-cases prints the case names.

Usage (root, on the GPU machine, from the repo root):
  python3 bench/gpu/accuracy.py --gpuwhy build/gpuwhy --out DIR [--cases a,b] [--trace-seconds 20]
  python3 bench/gpu/accuracy.py --list-cases
  python3 bench/gpu/accuracy.py --gpuwhy build/gpuwhy --out DIR --merge --cases PART
with PART the first seven cases (healthy,cpu-contention,slow-worker,pageable-memcpy,sync-heavy,
malloc-churn,io-bottleneck: ~6 min), then the other eight (gil-thread,main-thread-batches,
tiny-kernels,gpu-neighbour,checkpoint,worker-oversubscription,gpu-bound,cpu-quota: ~6.5 min).
Without a GPU (orchestration only: fake trainer on the simulated CUDA runtime if found next to
gpuwhy, real gpuwhy trace/explain, process clean-up checked):
  python3 bench/gpu/accuracy.py --self-test --gpuwhy build/gpuwhy --out /tmp/acc-selftest
Stdlib only; torch only inside the trainer; pynvml optional.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# One case: the injected fault (a description, formatted with the run's parameters), the rules
# any of which is the right top finding (empty: nothing above LOW), the trainer's arguments, what
# the measured loss is judged by ("slowdown": steps/s healthy vs faulted in the same process;
# "gpu-idle": no healthy equivalent, the GPU idle share from NVML instead), the least settle
# time the fault needs to take effect, and whether the report must also call the job GPU-bound.
Case = collections.namedtuple("Case", "fault expected trainer_args reference settle_min_s "
                                      "gpu_bound launched",
                              defaults=("slowdown", 0.0, False, False))

CASES = {
    "healthy": Case("none: GPU-bound loop, DataLoader(num_workers=4, pin_memory=True, "
                    "persistent_workers=True)", [], ["--fault", "healthy"]),
    "cpu-contention": Case("trainer under taskset -c {cpus}; it Popen()s {burners} busy loops "
                           "pinned to those cores", ["cpu-contention"],
                           ["--fault", "cpu-contention"]),
    "slow-worker": Case("num_workers=2; worker 0 burns {slow_ms} ms CPU per batch",
                        ["dataloader-starvation"], ["--fault", "slow-worker", "--workers", "2"]),
    "pageable-memcpy": Case("{pageable_mb} MiB pageable host tensor .to(cuda) synchronously each "
                            "step", ["memcpy-bottleneck"], ["--fault", "pageable-memcpy"]),
    "sync-heavy": Case(".item() after every encoder block and per-parameter grad norm",
                       ["sync-heavy"], ["--fault", "sync-heavy"]),
    "malloc-churn": Case("torch.cuda.empty_cache() every step",
                         ["malloc-churn", "allocator-spikes"], ["--fault", "malloc-churn"]),
    "io-bottleneck": Case("num_workers=2; {io_reads} random {io_kb} KiB reads per sample, "
                          "{io_how}", ["io-bottleneck"],
                          ["--fault", "io-bottleneck", "--workers", "2"]),
    "gil-thread": Case("a daemon thread of the trainer loops on pure-Python integer arithmetic "
                       "(torch_faults.gil_hog), holding the GIL",
                       ["lock-contention", "gil-contention"], ["--fault", "gil-thread"]),
    "main-thread-batches": Case("batches built on the main thread (num_workers=0 semantics): "
                                "batch-size x dataset[i] + {main_ms} ms Python CPU each, "
                                "torch.stack, pin_memory()", ["host-compute"],
                                ["--fault", "main-thread-batches"]),
    "tiny-kernels": Case("step = 48 x Linear(64,64)+ReLU MLP at batch 16, forward + backward + "
                         "AdamW, instead of the transformer (host-bound dispatch; no healthy "
                         "equivalent)", ["host-compute", "launch-bound"],
                         ["--fault", "tiny-kernels"], reference="gpu-idle"),
    "gpu-neighbour": Case("trainer Popen()s a process (own session) doing bf16 {nn}x{nn} "
                          "matmuls on the same GPU", ["gpu-sharing"],
                          ["--fault", "gpu-neighbour"], settle_min_s=8.0),
    "checkpoint": Case("main thread torch.save()s a {ckpt_mb} MiB state dict + fsync every "
                       "{ckpt_every} s of training into {ckpt_dir}, deleting the previous one",
                       ["main-thread-io"], ["--fault", "checkpoint"]),
    "locked-checkpoint": Case("a background thread of the trainer torch.save()s a {ckpt_mb} MiB "
                              "state dict + fsync every {ckpt_every} s into {ckpt_dir} holding "
                              "a lock the training loop takes every step",
                              ["main-thread-io", "lock-contention"],
                              ["--fault", "locked-checkpoint"]),
    "worker-oversubscription": Case("trainer + 4 workers under taskset -c {cpus}; each worker "
                                    "set_num_threads({oversub_threads}) and {oversub_matmuls} "
                                    "256x256 matmuls per sample", ["cpu-oversubscription"],
                                    ["--fault", "worker-oversubscription"]),
    "gpu-bound": Case("control: the transformer step 3 times per loader batch (the GPU sets "
                      "the pace; expect GPU-bound, nothing above LOW)", [],
                      ["--fault", "gpu-bound"], reference="gpu-idle", gpu_bound=True),
    "poll-sleep": Case("main thread time.sleep()s 15 ms (the trainer's --poll-ms) each step after queuing it "
                       "(a polling throttle the GPU works through: a control, expect nothing "
                       "above LOW)", [], ["--fault", "poll-sleep"]),
    "eval-subprocess": Case("every 1 s the main thread subprocess.run()s a python3 -c program "
                            "computing 300 ms and waits for it (the trainer's --eval-every-s, "
                            "--eval-ms)",
                            ["waits-for-program"], ["--fault", "eval-subprocess"]),
    "network-loader": Case("each sample fetched over TCP (127.0.0.1) from a sample server the "
                           "trainer starts, which answers 10 ms after each request (the "
                           "trainer's --net-ms): workers wait on the network",
                           ["loader-waits", "waits-for-program"],
                           ["--fault", "network-loader"]),
    "cpu-quota": Case("trainer and workers moved into cgroup v2 {quota_cg}, cpu.max "
                      "\"{quota_max}\"", ["cpu-quota"],
                      ["--fault", "cpu-quota"]),
    "launched": Case("control: the healthy trainer started by `gpuwhy trace -- CMD` (its "
                     "imports, model set-up and worker start inside the window) running "
                     "{launch_job_s} s and exiting inside the window: nothing above LOW, and "
                     "the start-up before the first CUDA call reported outside the loop "
                     "(budget.startup_s > 0)", [], ["--fault", "healthy"], reference="none",
                     launched=True),
    "fresh-memory": Case("each sample, a worker maps 16 MiB of fresh memory, writes every page "
                         "and unmaps it (the trainer's --fresh-mb): page faults in the workers",
                         ["dataloader-starvation"], ["--fault", "fresh-memory"]),
}
QUOTA_CGROUP = "/sys/fs/cgroup/gwacc-quota"
MIN_RATIO_LOST_S = 0.5  # lost_ratio only when the measured loss is at least this
CKPT_PREFIX = "gpuwhy_ckpt_"  # torch_faults.CKPT_PREFIX: checkpoint files "<prefix><pid>_<n>.pt"
NEIGHBOUR_MARK = "gpuwhy-accuracy gpu-neighbour"  # first line of torch_faults.NEIGHBOUR_CODE
KTHREAD_NAMES = re.compile(r"\b(kworker|ksoftirqd|migration/|rcu_|kthreadd|irq/|swapper|jbd2|"
                           r"kcompactd|khugepaged|kswapd|cpuhp/|watchdog/|idle_inject|kblockd|"
                           r"kintegrity|writeback|scsi_|nvme-|loop\d)", re.I)
KIND_LEVEL = {"LOW": 1, "MEDIUM": 2, "HIGH": 3}

NVML_SAMPLER = r"""
import sys, time
out = open(sys.argv[1], "w", buffering=1)
try:
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
except Exception as e:
    out.write("# error %r\n" % (e,)); sys.exit(0)
while True:
    try:
        u = pynvml.nvmlDeviceGetUtilizationRates(h)
        out.write("%d %d %d\n" % (time.monotonic_ns(), u.gpu, u.memory))
    except Exception as e:
        out.write("# error %r\n" % (e,))
    time.sleep(0.1)
"""


def log(msg):
    print(f"[accuracy {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Processes

def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        if a:
            cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def proc_table():
    """pid -> (ppid, pgid, comm, flags) for every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            comm = s[s.index("(") + 1:s.rindex(")")]
            rest = s[s.rindex(")") + 2:].split()
            out[int(d)] = (int(rest[1]), int(rest[2]), comm, int(rest[6]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def descendants(pid, table=None):
    table = table or proc_table()
    kids, frontier = set(), {pid}
    while frontier:
        nxt = {p for p, v in table.items() if v[0] in frontier and p not in kids}
        kids |= nxt
        frontier = nxt
    return kids


def kernel_threads(table):
    return {p: v[2] for p, v in table.items() if v[3] & 0x00200000 or v[0] == 2 or p == 2}


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_group(proc, grace=8.0):
    """Stops a child started with start_new_session=True and everything in its process group or
    below it: SIGINT, then SIGTERM, then SIGKILL. Returns pids still alive afterwards."""
    if proc is None:
        return []
    pgid = proc.pid
    table = proc_table()
    family = descendants(proc.pid, table) | {p for p, v in table.items() if v[1] == pgid}
    family.add(proc.pid)
    for sig, wait_s in ((signal.SIGINT, grace), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if proc.poll() is None or any(alive(p) for p in family):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for p in family:  # anything that left the group (setsid) but is still below us
                if sig != signal.SIGINT and alive(p):
                    try:
                        os.kill(p, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            end = time.monotonic() + wait_s
            while time.monotonic() < end:
                proc.poll()
                if proc.returncode is not None and not any(alive(p) for p in family):
                    break
                time.sleep(0.1)
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass
    return sorted(p for p in family if alive(p))


def stop_plain(proc, sig=signal.SIGINT, timeout=30.0):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_capture(cmd, path, timeout):
    """Runs cmd to completion with stdout+stderr into path; returns (rc, seconds)."""
    t0 = time.monotonic()
    with open(path, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        except OSError as e:
            f.write(f"accuracy.py: cannot run {cmd[0]}: {e}\n")
            rc = 127
    return rc, time.monotonic() - t0


# ---------------------------------------------------------------------------------------------
# Measurements

def read_steps(path):
    steps, marks = [], []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    marks.append(line)
                    continue
                try:
                    steps.append(int(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return steps, marks


def rate(steps, t0, t1):
    if t1 <= t0:
        return None
    n = sum(1 for t in steps if t0 <= t < t1)
    return round(n / ((t1 - t0) / 1e9), 3)


def diskstats():
    """Sectors read and read I/Os, summed over whole disks (not partitions, loops or rams)."""
    sectors = ios = 0
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                v = line.split()
                name = v[2]
                if re.match(r"(loop|ram|dm-|md)", name):
                    continue
                if not os.path.exists(f"/sys/block/{name}"):
                    continue  # a partition: counted in its disk
                ios += int(v[3])
                sectors += int(v[5])
    except (OSError, IndexError, ValueError):
        pass
    return sectors, ios


def nvml_median(path, t0, t1):
    med, n, err = nvml_stats(path, t0, t1)[:3]
    return med, n, err


def nvml_stats(path, t0, t1):
    """(median, count, error, mean) of the NVML utilization samples in [t0, t1). The mean is the
    share of the window the GPU ran a kernel (each sample covers the same 100 ms)."""
    vals, err = [], None
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    err = line[1:].strip()
                    continue
                v = line.split()
                if len(v) == 3 and t0 <= int(v[0]) < t1:
                    vals.append(int(v[1]))
    except OSError as e:
        err = str(e)
    if not vals:
        return None, 0, err or "no samples", None
    return statistics.median(vals), len(vals), None, statistics.mean(vals)


# ---------------------------------------------------------------------------------------------
# The I/O case's dataset file

def mount_of(path):
    """(mount point, fstype, 'maj:min') of the mount holding path, from /proc/self/mountinfo."""
    best = ("/", "?", "0:0")
    path = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                a, b = line.split(" - ", 1)
                fa, fb = a.split(), b.split()
                mp = fa[4].replace("\\040", " ")
                under = path == mp or path.startswith(mp.rstrip("/") + "/")
                if under and len(mp) >= len(best[0]):
                    best = (mp, fb[0], fa[2])
    except (OSError, ValueError, IndexError):
        pass
    return best


def block_disk(st_dev):
    """'maj:min' of the whole disk holding a file system on st_dev, or None (not a block device)."""
    maj, mnr = os.major(st_dev), os.minor(st_dev)
    if maj == 0:
        return None
    sysdir = f"/sys/dev/block/{maj}:{mnr}"
    if not os.path.exists(sysdir):
        return None
    if os.path.exists(os.path.join(sysdir, "partition")):
        try:
            with open(os.path.join(os.path.realpath(sysdir), "..", "dev")) as f:
                return f.read().strip()
        except OSError:
            return None
    return f"{maj}:{mnr}"


def pick_disk_dir(args, out):
    """The directory for the I/O cases' files: --io-dir, else the first of /var/tmp, /tmp and
    DIR on a file system with block I/O below it. Returns (dir, fstype, candidates seen)."""
    cands = [args.io_dir] if args.io_dir else ["/var/tmp", "/tmp", out]
    seen = []
    chosen = None
    for d in cands:
        if not d or not os.path.isdir(d):
            continue
        mp, fstype, devno = mount_of(d)
        seen.append({"dir": d, "mount": mp, "fstype": fstype, "dev": devno})
        if fstype in ("tmpfs", "ramfs", "devtmpfs"):
            continue  # no block I/O below it
        chosen = chosen or (d, fstype)
    if chosen is None:
        chosen = (cands[0] if cands[0] else out, "?")
    return chosen[0], chosen[1], seen


def make_io_file(args, out):
    """Writes the dataset file and decides how workers read it. Returns an info dict."""
    d, fstype, seen = pick_disk_dir(args, out)
    info = {"candidates": seen}
    path = os.path.join(d, f"gpuwhy_accuracy_{os.getpid()}.bin")
    t0 = time.monotonic()
    chunk = bytearray(os.urandom(4 << 20))
    with open(path, "wb") as f:
        for i in range(max(1, args.io_file_mb // 4)):
            chunk[:8] = i.to_bytes(8, "little")  # no two chunks alike
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    st = os.fstat(fd)
    os.close(fd)
    info.update({"file": path, "dir": d, "fstype": fstype, "mb": args.io_file_mb,
                 "write_s": round(time.monotonic() - t0, 2)})
    mode, why = "odirect", ""
    try:
        import mmap
        buf = mmap.mmap(-1, args.io_read_kb * 1024)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            n = os.preadv(fd, [buf], args.io_read_kb * 1024)
            if n <= 0:
                raise OSError("short O_DIRECT read")
        finally:
            os.close(fd)
    except (OSError, AttributeError) as e:
        mode, why = "fadvise", f"O_DIRECT failed on {d} ({fstype}): {e}"
    info["mode"], info["odirect_failure"] = mode, why
    disk = block_disk(st.st_dev)
    info["disk"] = disk
    info["throttle"] = None
    blkio = "/sys/fs/cgroup/blkio"
    if args.io_throttle_mbps > 0 and disk and not os.path.isdir(blkio):
        # cgroup v2: the io controller's io.max (rbps) does what v1's blkio throttle does.
        cg = os.path.join("/sys/fs/cgroup", f"gpuwhy_accuracy_io_{os.getpid()}")
        try:
            enabled = enable_v2_controller("/sys/fs/cgroup", "io")
            info["enabled_io"] = enabled
            os.makedirs(cg, exist_ok=True)
            with open(os.path.join(cg, "io.max"), "w") as f:
                f.write(f"{disk} rbps={int(args.io_throttle_mbps * 1e6)}")
            info["throttle"] = {"cgroup": cg, "disk": disk, "read_mbps": args.io_throttle_mbps,
                                "version": 2}
        except OSError as e:
            info["throttle_error"] = f"cgroup v2 io.max on {disk}: {e}"
            try:
                os.rmdir(cg)
            except OSError:
                pass
            if info.pop("enabled_io", False):
                disable_v2_controller("/sys/fs/cgroup", "io")
    elif args.io_throttle_mbps > 0 and disk and os.path.isdir(blkio):
        cg = os.path.join(blkio, f"gpuwhy_accuracy_{os.getpid()}")
        try:
            os.makedirs(cg, exist_ok=True)
            with open(os.path.join(cg, "blkio.throttle.read_bps_device"), "w") as f:
                f.write(f"{disk} {int(args.io_throttle_mbps * 1e6)}")
            info["throttle"] = {"cgroup": cg, "disk": disk, "read_mbps": args.io_throttle_mbps}
        except OSError as e:
            info["throttle_error"] = str(e)
            try:
                os.rmdir(cg)
            except OSError:
                pass
    elif args.io_throttle_mbps > 0:
        info["throttle_error"] = "file not on a block device"
    return info


def remove_io_file(info):
    if not info:
        return
    try:
        os.unlink(info["file"])
    except OSError:
        pass
    if info.get("throttle"):
        cg = info["throttle"]["cgroup"]
        for _ in range(20):  # the workers leave it when they exit
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.2)
    if info.get("enabled_io"):
        disable_v2_controller("/sys/fs/cgroup", "io")


def enable_v2_controller(parent, name):
    """Enables cgroup v2 controller `name` for parent's children (cgroup.subtree_control).
    Returns True if this call enabled it, False if it already was; raises OSError where the
    hierarchy has no such controller or it cannot be enabled."""
    with open(os.path.join(parent, "cgroup.controllers")) as f:
        if name not in f.read().split():
            raise OSError(f"no {name} controller in {parent}/cgroup.controllers")
    sub = os.path.join(parent, "cgroup.subtree_control")
    with open(sub) as f:
        if name in f.read().split():
            return False
    with open(sub, "w") as f:
        f.write("+" + name)
    return True


def disable_v2_controller(parent, name):
    """Undoes enable_v2_controller; a controller another group uses now stays (harmless)."""
    try:
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
            f.write("-" + name)
    except OSError:
        pass


def checkpoint_dir(args, out):
    """Where the checkpoint case writes: the I/O cases' directory, if it has room for two
    checkpoints (the new one is written before the old one is deleted)."""
    d, fstype, seen = pick_disk_dir(args, out)
    st = os.statvfs(d)
    free_mb = st.f_bavail * st.f_frsize // (1 << 20)
    info = {"dir": d, "fstype": fstype, "free_mb": free_mb, "mb": args.ckpt_mb,
            "every_s": args.ckpt_every_s, "candidates": seen}
    if free_mb < 2 * args.ckpt_mb + 256:
        raise RuntimeError(f"{d} has {free_mb} MiB free, the checkpoint case needs "
                           f"{2 * args.ckpt_mb + 256}")
    return info


def remove_checkpoints(info, trainer_pid):
    """Checkpoint files the trainer left (it deletes its own, unless it was killed)."""
    if not info or not trainer_pid:
        return []
    left = glob.glob(os.path.join(info["dir"], f"{CKPT_PREFIX}{trainer_pid}_*.pt"))
    for p in left:
        try:
            os.unlink(p)
        except OSError:
            pass
    return left


class CaseSkipped(Exception):
    """A case that cannot run on this machine; its row says why."""


def read_kv(path):
    """A cgroup 'key value' file (cpu.stat) as a dict of ints."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if v.strip().lstrip("-").isdigit():
                    out[k] = int(v)
    except OSError:
        pass
    return out


def make_quota_cgroup(args):
    """The cpu-quota case's cgroup v2 group, QUOTA_CGROUP with cpu.max = --quota-cpu-max. The
    cpu controller is enabled in the parent's cgroup.subtree_control if it is not yet (and
    disabled again by remove_quota_cgroup). Raises CaseSkipped where that cannot be done."""
    parent = os.path.dirname(QUOTA_CGROUP)
    try:
        with open(os.path.join(parent, "cgroup.controllers")) as f:
            controllers = f.read().split()
    except OSError:
        raise CaseSkipped(f"no cgroup v2 cpu controller ({parent} is not a cgroup v2 "
                          f"hierarchy)") from None
    if "cpu" not in controllers:
        raise CaseSkipped(f"no cgroup v2 cpu controller (controllers of {parent}: "
                          f"{' '.join(controllers) or 'none'})")
    info = {"cgroup": QUOTA_CGROUP, "cpu_max": args.quota_cpu_max, "enabled_cpu": False}
    try:
        info["enabled_cpu"] = enable_v2_controller(parent, "cpu")
    except OSError as e:
        raise CaseSkipped(f"no cgroup v2 cpu controller (enabling +cpu in {parent}: {e})") from None
    try:
        if os.path.isdir(QUOTA_CGROUP):  # left by an interrupted run; empty unless still in use
            os.rmdir(QUOTA_CGROUP)
        os.mkdir(QUOTA_CGROUP)
        with open(os.path.join(QUOTA_CGROUP, "cpu.max"), "w") as f:
            f.write(args.quota_cpu_max)
    except OSError as e:
        remove_quota_cgroup(info)
        raise CaseSkipped(f"no cgroup v2 cpu controller (making {QUOTA_CGROUP} with cpu.max "
                          f"{args.quota_cpu_max!r}: {e})") from None
    return info


def remove_quota_cgroup(info):
    """Removes the group (its processes have exited by now; retried while they go) and, if this
    suite enabled it, the cpu controller in the parent's subtree_control. Returns an error."""
    if not info:
        return None
    err = None
    if os.path.isdir(info["cgroup"]):
        for _ in range(25):
            try:
                os.rmdir(info["cgroup"])
                err = None
                break
            except OSError as e:
                err = f"removing {info['cgroup']}: {e}"
                time.sleep(0.2)
    if info.get("enabled_cpu"):
        disable_v2_controller(os.path.dirname(info["cgroup"]), "cpu")
    return err


# ---------------------------------------------------------------------------------------------
# One case

def settle_s(args, case):
    """The case's settle phase: --settle-s, or longer where the fault needs it (not in the
    self-test, whose fake faults take effect at once)."""
    return args.settle_s if args.self_test else max(args.settle_s, CASES[case].settle_min_s)


def trainer_cmd(args, case, out, prep):
    """The trainer's command line; prep holds what the case made before it started (the io
    case's file, the checkpoint directory, the cpu-quota group)."""
    steps = os.path.join(out, f"{case}.steps")
    control = os.path.join(out, f"{case}.fault_on")
    total = args.warmup + args.healthy_s + settle_s(args, case) + args.trace_seconds + 90
    if args.self_test:
        cmd = [sys.executable, os.path.abspath(__file__), "--fake-trainer"]
    else:
        cmd = [args.python, os.path.join(HERE, "torch_faults.py")]
    cmd += ["--log", steps, "--control", control, "--duration", str(total)]
    cmd += CASES[case].trainer_args
    io = prep.get("io")
    if case == "cpu-contention":
        cmd += ["--cpus", args.contention_cpus, "--burners", str(args.burners)]
    if case == "worker-oversubscription":
        cmd += ["--cpus", args.contention_cpus, "--oversub-threads", str(args.oversub_threads),
                "--oversub-matmuls", str(args.oversub_matmuls)]
    if case == "main-thread-batches":
        cmd += ["--main-batch-cpu-ms", str(args.main_batch_cpu_ms)]
    if case == "gpu-neighbour":
        cmd += ["--neighbour-n", str(args.neighbour_n)]
    if case in ("checkpoint", "locked-checkpoint") and prep.get("checkpoint"):
        cmd += ["--ckpt-dir", prep["checkpoint"]["dir"], "--ckpt-mb", str(args.ckpt_mb),
                "--ckpt-every-s", str(args.ckpt_every_s)]
    if case == "cpu-quota" and prep.get("quota"):
        cmd += ["--quota-cgroup", prep["quota"]["cgroup"]]
    if case == "slow-worker":
        cmd += ["--slow-worker-ms", str(args.slow_worker_ms)]
    if case == "pageable-memcpy":
        cmd += ["--pageable-mb", str(args.pageable_mb)]
    if case == "io-bottleneck" and io:
        cmd += ["--io-file", io["file"], "--io-mode", io["mode"], "--io-reads", str(args.io_reads),
                "--io-read-kb", str(args.io_read_kb)]
        if io.get("throttle"):
            cmd += ["--io-cgroup", io["throttle"]["cgroup"]]
    cmd += args.trainer_arg
    return cmd, steps, control


def analyze(case, expected, report, tracer_pid, kthreads, want_gpu_bound=False):
    """What the explain report says about this case, against the expectation (want_gpu_bound:
    quiet is not enough, the report must also call the job GPU-bound)."""
    res = {"findings": [], "top": None}
    if not isinstance(report, dict) or "findings" not in report:
        res["error"] = (report or {}).get("error", "no report") if isinstance(report, dict) \
            else "no report"
        return res
    fs = report.get("findings") or []
    for f in fs:
        res["findings"].append({k: f.get(k) for k in ("rule", "severity", "lost_s", "title")})
    if fs:
        t = fs[0]
        res["top"] = {"rule": t.get("rule"), "severity": t.get("severity"),
                      "lost_s": t.get("lost_s"), "title": t.get("title"),
                      "metrics": {m.get("name"): m.get("value") for m in t.get("metrics", [])},
                      "root": t.get("root"), "effects": t.get("effects"),
                      "gpu_effect": t.get("gpu_effect"), "intervals": t.get("intervals")}
    serious = [f for f in fs if KIND_LEVEL.get(f.get("severity"), 0) >= 2]
    if expected:
        res["match"] = bool(fs) and fs[0].get("rule") in expected
        ranks = [i for i, f in enumerate(fs) if f.get("rule") in expected]
        res["expected_rank"] = ranks[0] + 1 if ranks else None
        res["expected_severity"] = fs[ranks[0]].get("severity") if ranks else None
        res["expected_lost_s"] = fs[ranks[0]].get("lost_s") if ranks else None
    else:
        res["match"] = not serious
    # GPU-bound: the budget's flag where the report has one, else the verdict line (which can
    # also say the GPU is shared, not that it is the bottleneck).
    budget = report.get("budget") if isinstance(report.get("budget"), dict) else {}
    res["says_gpu_bound"] = (bool(budget["gpu_bound"]) if "gpu_bound" in budget else
                             "is the bottleneck" in (report.get("gpu_verdict") or ""))
    if want_gpu_bound:
        res["match"] = res["match"] and res["says_gpu_bound"]
    res["high_or_medium"] = [f"{f.get('rule')} {f.get('severity')}" for f in serious]
    # Names or pids of gpuwhy itself or of kernel threads in any finding's text.
    bad = []
    for f in fs:
        texts = [f.get("title") or "", f.get("cause") or ""]
        for key in ("root", "effects", "contributing", "fix"):
            texts += [str(s) for s in (f.get(key) or [])]
        for s in texts:
            if re.search(r"gpuwhy(?! (trace|explain|query|diff|check))", s):
                bad.append(f"{f.get('rule')}: names gpuwhy: {s[:160]}")
            m = KTHREAD_NAMES.search(s)
            if m:
                bad.append(f"{f.get('rule')}: names kernel thread {m.group(0)!r}: {s[:160]}")
            for num in re.findall(r"\b\d{2,7}\b", s):
                p = int(num)
                if p == tracer_pid:
                    bad.append(f"{f.get('rule')}: names gpuwhy pid {p}: {s[:160]}")
                elif p in kthreads and re.search(rf"(-p[ \d]*\b{p}\b|pid {p}\b|\({p}\)|"
                                                 rf"for p in[ \d]*\b{p}\b|(?<![=\d])\b{p}\b \()", s):
                    bad.append(f"{f.get('rule')}: names kernel thread pid {p} "
                               f"({kthreads[p]}): {s[:160]}")
    res["bad_process_mentions"] = sorted(set(bad))
    res["fixes"] = {f"{i + 1}. {f.get('rule')}": f.get("fix") or [] for i, f in enumerate(fs)}
    res["feed_time"] = report.get("feed_time")
    res["top_processes"] = [{k: p.get(k) for k in ("pid", "name", "role", "tracked",
                                                   "took_cpu_from_feeders_s", "runq_s")}
                            for p in (report.get("top_processes") or [])[:6]]
    res["notes"] = report.get("notes")
    res["window_s"] = (report.get("window") or {}).get("seconds")
    res["gpus"] = report.get("gpus")
    res["gpu_verdict"] = report.get("gpu_verdict")
    return res


def run_launched_case(args, case, out, state):
    """A case whose trainer is started by `gpuwhy trace -- CMD` (the attach cases start it
    first): the window holds the job's start-up and its exit."""
    spec = CASES[case]
    t_case = time.monotonic()
    r = {"case": case, "expected": spec.expected or ["nothing above LOW"], "errors": [],
         "phases": {}, "reference": spec.reference,
         "fault": spec.fault.format(launch_job_s=f"{args.launch_job_s:g}")}
    db = os.path.join(out, f"{case}.db")
    for p in glob.glob(db + "*"):
        os.unlink(p)
    tracer = None
    try:
        cmd, steps_path, _ = trainer_cmd(args, case, out, {})
        cmd[cmd.index("--duration") + 1] = f"{args.launch_job_s:g}"
        trace_s = args.launch_job_s + 60  # the job ends the trace; this only bounds it
        trace_cmd = [args.gpuwhy, "trace", "--duration", f"{trace_s:g}s", "--db", db,
                     "--quiet"] + args.trace_arg + ["--"] + cmd
        r["trace_cmd"] = trace_cmd
        kthreads = kernel_threads(proc_table())
        tr0 = time.monotonic_ns()
        with open(os.path.join(out, f"{case}.trace.log"), "w") as tl:
            tracer = subprocess.Popen(trace_cmd, stdout=tl, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=out,
                                      env=dict(os.environ, PYTHONUNBUFFERED="1"))
        state["tracer"] = tracer
        r["tracer_pid"] = tracer.pid
        try:
            r["trace_rc"] = tracer.wait(timeout=trace_s + args.attach_timeout)
        except subprocess.TimeoutExpired:
            r["errors"].append("gpuwhy trace -- CMD overran; stopped with SIGINT")
            stop_plain(tracer)
            r["trace_rc"] = tracer.returncode
        tr1 = time.monotonic_ns()
        r["leftover_pids"] = stop_group(tracer, args.stop_grace)
        if r["leftover_pids"]:
            r["errors"].append(f"processes left after the job: {r['leftover_pids']}")
        ej = os.path.join(out, f"{case}.explain.json")
        rc, _ = run_capture([args.gpuwhy, "explain", "--db", db, "--json"], ej, 90)
        r["explain_rc"] = rc
        run_capture([args.gpuwhy, "explain", "--db", db], os.path.join(out, f"{case}.explain.txt"),
                    90)
        try:
            with open(ej) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {"error": open(ej).read().strip()[:500] if os.path.exists(ej) else "none"}
        steps, _ = read_steps(steps_path)
        if steps:
            r["phases"]["first_step_after_s"] = round((steps[0] - tr0) / 1e9, 2)
            r["steps_per_s"] = {"job": rate(steps, steps[0], steps[-1])}
        r["phases"]["trace_s"] = round((tr1 - tr0) / 1e9, 2)
        r["gpuwhy"] = analyze(case, spec.expected, report, tracer.pid, kthreads)
        budget = report.get("budget") if isinstance(report.get("budget"), dict) else {}
        if budget:
            r["budget"] = budget
        r["startup_s"], r["exit_s"] = budget.get("startup_s"), budget.get("exit_s")
        # The check that can fail: the start-up seen and cut (a launched job's imports take
        # seconds before its first CUDA call).
        if not (r["startup_s"] or 0) > 0:
            r["gpuwhy"]["match"] = False
            r["errors"].append("no start-up reported outside the loop (budget.startup_s)")
        top = (r["gpuwhy"].get("top") or {}).get("lost_s")
        r["explain_lost_s"] = top if top is not None else (
            0.0 if "findings" in (report or {}) else None)
        r["measured_lost_s"] = None
    except Exception as e:  # one bad case must not stop the suite
        r["errors"].append(f"{type(e).__name__}: {e}")
    finally:
        if tracer is not None and tracer.poll() is None:
            stop_plain(tracer)
        state["tracer"] = None
        r["case_s"] = round(time.monotonic() - t_case, 2)
    return r


def run_case(args, case, out, state):
    spec = CASES[case]
    if spec.launched:
        return run_launched_case(args, case, out, state)
    desc, expected = spec.fault, spec.expected
    has_fault = case != "healthy"  # gpu-bound expects nothing, but is switched on all the same
    settle = settle_s(args, case)
    t_case = time.monotonic()
    r = {"case": case, "expected": expected or ["nothing above LOW"], "errors": [], "phases": {},
         "reference": spec.reference}
    io = None
    prep = {}
    trainer = tracer = sampler = None
    db = os.path.join(out, f"{case}.db")
    for p in glob.glob(db + "*"):
        os.unlink(p)
    try:
        if case == "io-bottleneck":
            io = make_io_file(args, out)
            r["io"] = io
            how = ("O_DIRECT" if io["mode"] == "odirect" else
                   "posix_fadvise(DONTNEED)+buffered (" + io["odirect_failure"] + ")")
            how += f" on {io['dir']} ({io['fstype']})"
            if io.get("throttle"):
                how += (f", {'io.max' if io['throttle'].get('version') == 2 else 'blkio'} "
                        f"throttled to {args.io_throttle_mbps:g} MB/s")
            desc = desc.format(io_reads=args.io_reads, io_kb=args.io_read_kb, io_how=how)
            prep["io"] = io
        else:
            if case in ("checkpoint", "locked-checkpoint"):
                prep["checkpoint"] = r["checkpoint"] = checkpoint_dir(args, out)
            desc = desc.format(cpus=args.contention_cpus, burners=args.burners,
                               slow_ms=f"{args.slow_worker_ms:g}",
                               pageable_mb=args.pageable_mb,
                               main_ms=f"{args.main_batch_cpu_ms:g}", nn=args.neighbour_n,
                               ckpt_mb=args.ckpt_mb, ckpt_every=f"{args.ckpt_every_s:g}",
                               ckpt_dir=(prep.get("checkpoint") or {}).get("dir"),
                               oversub_threads=args.oversub_threads,
                               oversub_matmuls=args.oversub_matmuls, quota_cg=QUOTA_CGROUP,
                               quota_max=args.quota_cpu_max)
        r["fault"] = desc
        if case == "cpu-quota":
            prep["quota"] = r["quota"] = make_quota_cgroup(args)  # or CaseSkipped
        cmd, steps_path, control = trainer_cmd(args, case, out, prep)
        if os.path.exists(control):
            os.unlink(control)
        r["trainer_cmd"] = cmd
        tlog = open(os.path.join(out, f"{case}.train.log"), "w")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        t_start = time.monotonic()
        trainer = subprocess.Popen(cmd, stdout=tlog, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True, cwd=out)
        state["trainer"] = trainer
        tlog.close()
        r["trainer_pid"] = trainer.pid
        # Warm-up: first step, then until warmup seconds after start and >= 3 s of steps.
        first = None
        while True:
            if trainer.poll() is not None:
                raise RuntimeError(f"trainer exited during warm-up (rc {trainer.returncode}); "
                                   f"see {case}.train.log")
            steps, _ = read_steps(steps_path)
            now = time.monotonic()
            if steps and first is None:
                first = now
                r["phases"]["first_step_after_s"] = round(now - t_start, 2)
            if first is not None and now - t_start >= args.warmup and now - first >= 3:
                break
            if first is None and now - t_start > args.startup_timeout:
                raise RuntimeError(f"no step within {args.startup_timeout:g} s")
            time.sleep(0.2)
        # Healthy phase (untraced).
        h0 = time.monotonic_ns()
        time.sleep(args.healthy_s)
        h1 = time.monotonic_ns()
        # Fault on; the last 2/3 of the settle phase is the untraced faulted rate. With
        # --fault-onset the fault is switched on inside the traced window instead, so the
        # window holds a healthy stretch to compare with (the settle phase stays healthy).
        onset = args.fault_onset if has_fault else 0
        if has_fault and onset <= 0:
            open(control, "w").close()
        f0 = time.monotonic_ns()
        time.sleep(settle)
        f1 = time.monotonic_ns()
        if trainer.poll() is not None:
            raise RuntimeError(f"trainer exited (rc {trainer.returncode}) before tracing")
        # Traced phase.
        kthreads = kernel_threads(proc_table())
        d0 = diskstats()
        q0 = read_kv(os.path.join(QUOTA_CGROUP, "cpu.stat")) if prep.get("quota") else {}
        nv = os.path.join(out, f"{case}.nvml.txt")
        if args.nvml:
            sampler = subprocess.Popen([args.python, "-c", NVML_SAMPLER, nv],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        trace_cmd = [args.gpuwhy, "trace", "--duration", f"{args.trace_seconds:g}s", "--db", db,
                     "--quiet"] + args.trace_arg
        r["trace_cmd"] = trace_cmd
        tr0 = time.monotonic_ns()
        with open(os.path.join(out, f"{case}.trace.log"), "w") as tl:
            tracer = subprocess.Popen(trace_cmd, stdout=tl, stderr=subprocess.STDOUT)
        state["tracer"] = tracer
        r["tracer_pid"] = tracer.pid
        fon = None
        if onset > 0:
            time.sleep(onset)
            open(control, "w").close()
            fon = time.monotonic_ns()
        else:
            time.sleep(min(2.0, args.trace_seconds / 4))
        table = proc_table()
        fam = {}
        for pid in descendants(trainer.pid, table):
            fam[table[pid][2]] = fam.get(table[pid][2], 0) + 1
        r["trainer_children_by_comm"] = fam  # DataLoader workers, burners, ...
        try:
            r["trace_rc"] = tracer.wait(timeout=args.trace_seconds + args.attach_timeout)
        except subprocess.TimeoutExpired:
            r["errors"].append("gpuwhy trace overran; stopped with SIGINT")
            stop_plain(tracer)
            r["trace_rc"] = tracer.returncode
        tr1 = time.monotonic_ns()
        d1 = diskstats()
        if prep.get("quota"):  # the ground truth of the quota: how long the group was throttled
            q1 = read_kv(os.path.join(QUOTA_CGROUP, "cpu.stat"))
            traced = {k: q1[k] - q0.get(k, 0) for k in ("usage_usec", "throttled_usec",
                                                         "nr_throttled", "nr_periods") if k in q1}
            r["quota"]["traced"] = {k.replace("_usec", "_s"): round(v / 1e6, 3)
                                    if k.endswith("_usec") else v for k, v in traced.items()}
        if sampler is not None:
            stop_plain(sampler, signal.SIGTERM, 5)
        trainer_alive = trainer.poll() is None
        if not trainer_alive:
            r["errors"].append(f"trainer exited early (rc {trainer.returncode})")
        # Stop the trainer and everything it started.
        left = stop_group(trainer, args.stop_grace)
        state["trainer"] = None
        r["leftover_pids"] = left
        if left:
            r["errors"].append(f"processes left after stopping the trainer: {left}")
        t_stopped = time.monotonic()
        # Explain.
        # JSON, then text; an explain that fails with "refused" is retried once.
        ej = os.path.join(out, f"{case}.explain.json")
        ex0 = time.monotonic()
        rc, _ = run_capture([args.gpuwhy, "explain", "--db", db, "--json"], ej, 90)
        if rc != 0 and "refused" in open(ej).read():
            r["errors"].append("explain --json refused once; retried")
            time.sleep(1)
            rc, _ = run_capture([args.gpuwhy, "explain", "--db", db, "--json"], ej, 90)
        r["explain_rc"], r["explain_s"] = rc, round(time.monotonic() - ex0, 2)
        run_capture([args.gpuwhy, "explain", "--db", db], os.path.join(out, f"{case}.explain.txt"),
                    90)
        report = None
        try:
            with open(ej) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {"error": open(ej).read().strip()[:500] if os.path.exists(ej) else "none"}
        # Windows in CLOCK_MONOTONIC.
        mono_start = None
        try:
            q = subprocess.run([args.gpuwhy, "query", "--db", db, "--json",
                                "SELECT mono_start_ns FROM sessions ORDER BY id DESC LIMIT 1"],
                               capture_output=True, text=True, timeout=60)
            mono_start = json.loads(q.stdout)[0]["mono_start_ns"]
        except (OSError, ValueError, IndexError, KeyError, TypeError,
                subprocess.TimeoutExpired):
            pass
        win = (report or {}).get("window") if isinstance(report, dict) else None
        if mono_start is not None and win and win.get("to_ns"):
            w0, w1, src = mono_start + win["from_ns"], mono_start + win["to_ns"], "explain window"
        else:
            w0, w1, src = tr0 + int(2e9), tr1, "tracer run (first 2 s dropped)"
        steps, marks = read_steps(steps_path)
        r["marks"] = marks
        on = [int(m.split()[-1]) for m in marks if m.startswith("# fault on")]
        r["fault_seen_after_s"] = round((on[0] - f0) / 1e9, 3) if on else None
        if has_fault and not on:
            r["errors"].append("the trainer never reported the fault on")
        if fon is None:
            r["steps_per_s"] = {"healthy": rate(steps, h0, h1),
                                "faulted_untraced": rate(steps, f0 + (f1 - f0) // 3, f1),
                                "faulted_traced": rate(steps, w0, w1)}
        else:  # the first second after the switch is the fault taking effect
            r["fault_onset_s"] = round((fon - w0) / 1e9, 2)
            r["steps_per_s"] = {"healthy": rate(steps, h0, h1),
                                "healthy_traced": rate(steps, w0, fon),
                                "faulted_traced": rate(steps, fon + int(1e9), w1)}
            if args.nvml:
                r["nvml_util_median_healthy_part"] = nvml_median(nv, w0, fon)[0]
                r["nvml_util_median_faulted_part"] = nvml_median(nv, fon + int(1e9), w1)[0]
        hs, ft = r["steps_per_s"]["healthy"], r["steps_per_s"]["faulted_traced"]
        r["slowdown"] = round(hs / ft, 2) if hs and ft else None
        r["traced_window"] = {"source": src, "seconds": round((w1 - w0) / 1e9, 2),
                              "attach_to_window_start_s": round((w0 - tr0) / 1e9, 2)}
        med, n, err, mean = nvml_stats(nv, w0, w1) if args.nvml else (None, 0, "disabled", None)
        r["nvml_util_median"] = med
        r["nvml_samples"] = n
        if err:
            r["nvml_error"] = err
        # Lost time: measured (the steps the fault cost over the part of the window it was
        # present) against explain's. With --fault-onset that part starts 1 s after the switch.
        fault_from = fon + int(1e9) if fon is not None else w0
        fault_s = max(0.0, (w1 - fault_from) / 1e9)
        if fon is not None and args.nvml:
            mean = nvml_stats(nv, fault_from, w1)[3]
        r["gpu_idle_share_pct"] = round(100.0 - mean, 1) if mean is not None else None
        r["fault_window_s"] = round(fault_s, 2)
        measured = None
        if spec.reference == "slowdown" and hs and ft is not None:
            measured = round((1 - ft / hs) * fault_s, 2) + 0.0  # no "-0.0"
        r["measured_lost_s"] = measured
        secs = max(1e-9, (tr1 - tr0) / 1e9)
        r["disk_read_mb_s"] = round((d1[0] - d0[0]) * 512 / 1e6 / secs, 2)
        r["disk_read_iops"] = round((d1[1] - d0[1]) / secs, 1)
        r["gpuwhy"] = analyze(case, expected, report, tracer.pid, kthreads, spec.gpu_bound)
        top_lost = (r["gpuwhy"].get("top") or {}).get("lost_s")
        r["explain_lost_s"] = top_lost if top_lost is not None else (
            0.0 if "findings" in (report or {}) else None)  # no finding: nothing lost
        # The ratio only where the fault cost something measurable (a near-zero measured loss
        # makes any ratio noise).
        r["lost_ratio"] = (round(r["explain_lost_s"] / measured, 2)
                           if r["explain_lost_s"] is not None and measured is not None
                           and measured >= MIN_RATIO_LOST_S else None)
        if isinstance(report, dict) and "budget" in report:
            r["budget"] = report["budget"]  # the engine's GPU busy/idle split, as it is
        r["phases"].update({
            "warmup_s": round((h0 / 1e9) - t_start, 2), "healthy_s": round((h1 - h0) / 1e9, 2),
            "settle_s": round((f1 - f0) / 1e9, 2), "trace_s": round((tr1 - tr0) / 1e9, 2),
            "stop_s": round(t_stopped - tr1 / 1e9, 2)})
    except CaseSkipped as e:
        r["skipped"] = str(e)
    except Exception as e:  # one bad case must not stop the suite
        r["errors"].append(f"{type(e).__name__}: {e}")
    finally:
        if tracer is not None and tracer.poll() is None:
            stop_plain(tracer)
        if sampler is not None and sampler.poll() is None:
            stop_plain(sampler, signal.SIGTERM, 5)
        if state.get("trainer") is not None:
            r["leftover_pids"] = stop_group(state["trainer"], args.stop_grace)
            state["trainer"] = None
        state["tracer"] = None
        remove_io_file(io)
        left = remove_checkpoints(prep.get("checkpoint"), r.get("trainer_pid"))
        if left:
            r["errors"].append(f"checkpoint files left by the trainer, removed: {left}")
        if prep.get("quota"):
            err = remove_quota_cgroup(prep["quota"])
            if err:
                r["errors"].append(err)
        if os.path.exists(os.path.join(out, f"{case}.fault_on")):
            os.unlink(os.path.join(out, f"{case}.fault_on"))
        r["case_s"] = round(time.monotonic() - t_case, 2)
    return r


# ---------------------------------------------------------------------------------------------
# Reports

def fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def budget_text(b):
    """One line for the explain JSON's `budget` object: the GPU's busy/idle split and the lost
    seconds by cause. Unknown shapes are shown as their scalar fields."""
    if not isinstance(b, dict):
        return str(b)
    known = ("gpu_busy_job_s", "gpu_busy_other_s", "gpu_idle_s", "window_s")
    if all(k in b for k in known):
        text = (f"({b.get('source')}) GPU busy {fmt(b['gpu_busy_job_s'])} s for the job, "
                f"{fmt(b['gpu_busy_other_s'])} s for others, idle {fmt(b['gpu_idle_s'])} s "
                f"of {fmt(b['window_s'])} s (attributed {fmt(b.get('idle_attributed_s'))} s)"
                + ("; GPU-bound" if b.get("gpu_bound") else ""))
    else:
        text = ", ".join(f"{k}={fmt(v, 2)}" for k, v in b.items()
                         if not isinstance(v, (dict, list)))
    causes = [c for c in b.get("causes") or [] if isinstance(c, dict)
              and (c.get("lost_s") or c.get("path_s"))]
    if causes:
        text += "; by cause, lost (path): " + ", ".join(
            f"{c.get('cause')} {fmt(c.get('lost_s'), 2)} ({fmt(c.get('path_s'), 1)})"
            for c in causes)
    return text


def lost_cell(r):
    """The table's lost-time cell: explain's top finding vs the measured loss, or the GPU idle
    share where the case has no healthy equivalent."""
    explain = fmt(r.get("explain_lost_s"), 2)
    if r.get("reference") == "gpu-idle":
        return f"{explain} / GPU idle {fmt(r.get('gpu_idle_share_pct'))}%"
    ratio = f" ({fmt(r.get('lost_ratio'), 2)})" if r.get("lost_ratio") is not None else ""
    return f"{explain} / {fmt(r.get('measured_lost_s'), 2)}{ratio}"


def write_summary(out, meta, results):
    ran = [r for r in results if not r.get("skipped") and r.get("gpuwhy")]
    faulted = [r for r in ran if r["case"] != "healthy"]
    healthy = [r for r in ran if r["case"] == "healthy"]
    verdict = (f"top finding matches on {sum(1 for r in faulted if r['gpuwhy'].get('match'))}/"
               f"{len(faulted)} cases with a fault (gpu-bound: quiet and GPU-bound); healthy "
               + ("not run" if not healthy else "clean (nothing above LOW)"
                  if healthy[0]["gpuwhy"].get("match") else "**HIGH/MEDIUM found**")
               + f"; findings naming gpuwhy or kernel threads in "
               f"{sum(1 for r in ran if r['gpuwhy'].get('bad_process_mentions'))} cases")
    meta["verdict"] = verdict
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "cases": results}, f, indent=1)
    L = ["# gpuwhy accuracy suite", "",
         f"{meta['started']} · gpuwhy `{meta['gpuwhy']}` · trace {meta['trace_seconds']:g} s per "
         f"case · total {meta.get('total_s', 0):.0f} s" + (" · **self-test (fake trainer)**"
                                                         if meta.get("self_test") else ""), "",
         "| case | injected fault | steps/s healthy → faulted (traced) | slowdown | NVML util "
         "| top finding | lost s: explain / measured (ratio) | headline metrics | expected "
         "| match | HIGH/MED | bad names | case s |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    L.insert(3, verdict)
    L.insert(4, "")
    for r in results:
        g = r.get("gpuwhy") or {}
        top = g.get("top") or {}
        sps = r.get("steps_per_s") or {}
        metrics = ", ".join(f"{k}={fmt(v, 2)}"
                            for k, v in list((top.get("metrics") or {}).items())[:4])
        exp = "/".join(r["expected"])
        if r.get("skipped"):
            L.append(f"| {r['case']} | {r.get('fault', '')} | skipped: {r['skipped']} |||||||||||")
            continue
        match = {True: "yes", False: "**NO**"}.get(g.get("match"), "–")
        if r["expected"] and g.get("expected_rank") and not g.get("match"):
            match += f" (expected at #{g['expected_rank']}, {g.get('expected_severity')})"
        hm = ", ".join(g.get("high_or_medium") or []) or "none"
        if r["case"] == "healthy" and g.get("high_or_medium"):
            hm = f"**{hm}**"
        L.append(
            f"| {r['case']} | {r.get('fault', '')} | {fmt(sps.get('healthy'))} → "
            f"{fmt(sps.get('faulted_traced'))} (untraced {fmt(sps.get('faulted_untraced'))}) "
            f"| {fmt(r.get('slowdown'), 2)}× | {fmt(r.get('nvml_util_median'))} "
            f"| {top.get('rule', '–')} {top.get('severity', '')} | {lost_cell(r)} "
            f"| {metrics or '–'} | {exp} | {match} | {hm} "
            f"| {len(g.get('bad_process_mentions') or []) or 'none'} | {fmt(r.get('case_s'), 0)} |")
    L.append("")
    for r in results:
        if r.get("skipped"):
            continue
        g = r.get("gpuwhy") or {}
        L += [f"## {r['case']}", "", f"fault: {r.get('fault', '')}"
              + (f" (from the run of {r['run_started']})" if r.get("run_started") else ""), ""]
        if r.get("errors"):
            L += ["errors:"] + [f"- {e}" for e in r["errors"]] + [""]
        if g.get("error"):
            L += [f"explain: {g['error']}", ""]
        L.append(f"- traced window: {r.get('traced_window')}; phases: {r.get('phases')}")
        L.append(f"- lost: explain (top finding) {fmt(r.get('explain_lost_s'), 2)} s, expected "
                 f"rule's {fmt(g.get('expected_lost_s'), 2)} s, measured "
                 f"{fmt(r.get('measured_lost_s'), 2)} s over the {fmt(r.get('fault_window_s'))} s "
                 f"the fault was in the window (ratio {fmt(r.get('lost_ratio'), 2)}); GPU idle "
                 f"{fmt(r.get('gpu_idle_share_pct'))}% (NVML); report says GPU-bound: "
                 f"{g.get('says_gpu_bound')}")
        if "budget" in r:
            L.append(f"- budget: {budget_text(r['budget'])}")
        if r.get("checkpoint"):
            c = r["checkpoint"]
            L.append(f"- checkpoint: {c.get('mb')} MiB every {c.get('every_s')} s into "
                     f"{c.get('dir')} ({c.get('fstype')}, {c.get('free_mb')} MiB free)")
        if r.get("quota"):
            q = r["quota"]
            L.append(f"- quota: {q.get('cgroup')} cpu.max {q.get('cpu_max')!r}"
                     + (" (+cpu enabled in the parent by this run)" if q.get("enabled_cpu")
                        else "") + f"; during the trace: {q.get('traced')}")
        L.append(f"- disk read {fmt(r.get('disk_read_mb_s'), 2)} MB/s, "
                 f"{fmt(r.get('disk_read_iops'))} IO/s during the trace; NVML samples "
                 f"{r.get('nvml_samples', 0)} {r.get('nvml_error', '')}")
        if r.get("io"):
            io = r["io"]
            L.append(f"- io: {io.get('mode')} on {io.get('dir')} ({io.get('fstype')}), disk "
                     f"{io.get('disk')}, throttle {io.get('throttle') or io.get('throttle_error')}"
                     + (f"; **{io['odirect_failure']}**" if io.get("odirect_failure") else ""))
        L.append("- findings: " + ("; ".join(
            f"{f['rule']} {f['severity']} lost {fmt(f.get('lost_s'), 2)} s"
            for f in g.get("findings") or []) or "none"))
        top = g.get("top") or {}
        for s in (top.get("root") or []) + (top.get("effects") or []):
            L.append(f"  - {s}")
        for b in g.get("bad_process_mentions") or []:
            L.append(f"- **bad name**: {b}")
        if g.get("fixes"):
            L.append("- fixes:")
            for k, fx in g["fixes"].items():
                for s in fx:
                    L.append(f"  - {k}: {s}")
        for grp in g.get("feed_time") or []:
            causes = ", ".join(f"{c.get('cause')} {fmt(c.get('pct'))}%"
                               for c in grp.get("causes", [])[:6])
            L.append(f"- feed time {grp.get('group')} ({grp.get('threads')} threads, "
                     f"{fmt(grp.get('thread_seconds'))} s): {causes}")
        if g.get("top_processes"):
            L.append("- top processes: " + ", ".join(
                f"{p['name']}({p['pid']},{p['role']})" for p in g["top_processes"]))
        L.append("")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(L) + "\n")


# ---------------------------------------------------------------------------------------------
# Fake trainer for --self-test: the same flags and steps log as torch_faults.py, no torch.

def fake_trainer(argv):
    p = argparse.ArgumentParser()
    for a in ("--log", "--control", "--fault", "--cpus", "--io-file", "--io-mode",
              "--io-cgroup", "--sim-lib", "--ckpt-dir", "--quota-cgroup"):
        p.add_argument(a, default="")
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--burners", type=int, default=3)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--io-reads", type=int, default=48)
    p.add_argument("--io-read-kb", type=int, default=16)
    p.add_argument("--ckpt-mb", type=int, default=16)
    p.add_argument("--ckpt-every-s", type=float, default=2)
    args, _ = p.parse_known_args(argv)
    sys.path.insert(0, HERE)
    import torch_faults  # stdlib at module level; torch is imported inside its main()
    io = ckpt = saver = gil = quota = None
    if args.fault == "io-bottleneck" and args.io_file:
        io = torch_faults.IoReader(args)
    if args.fault == "checkpoint" and args.ckpt_dir:  # the real writer, plain bytes for torch.save
        blob = b"\x5a" * (args.ckpt_mb << 20)
        ckpt = torch_faults.Checkpointer(args.ckpt_dir, args.ckpt_every_s, lambda f: f.write(blob))
    if args.fault == "locked-checkpoint" and args.ckpt_dir:
        blob = b"\x5a" * (args.ckpt_mb << 20)
        saver = torch_faults.LockedSaver(torch_faults.Checkpointer(
            args.ckpt_dir, args.ckpt_every_s, lambda f: f.write(blob)))
    if args.fault == "gil-thread":
        gil = torch_faults.GilHog()
    if args.fault == "cpu-quota" and args.quota_cgroup:
        quota = torch_faults.CgroupMover(args.quota_cgroup)
    if args.cpus:
        have = os.sched_getaffinity(0)
        os.sched_setaffinity(0, (parse_cpus(args.cpus) & have) or have)
    rt = kernels = None
    sim = args.sim_lib or os.environ.get("GWSIM_LIB_DIR", "")
    if sim and os.path.exists(os.path.join(sim, "libcudart.so.13")):
        import ctypes
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "gw_train_loop_py", os.path.join(REPO, "sim", "workloads", "train_loop.py"))
        tl = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tl)
        rt = tl.load_runtime(sim)
        kernels = tl.Kernels(rt)
        kernel_ns = ctypes.c_uint64(3_000_000)
        dbuf, dloss = ctypes.c_void_p(), ctypes.c_void_p()
        rt.cudaMalloc(ctypes.byref(dbuf), 1 << 20)
        rt.cudaMalloc(ctypes.byref(dloss), 64)
    # A forked child, like a DataLoader worker (must be cleaned up too).
    kids = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:  # ignores SIGINT/SIGTERM: only the controller's SIGKILL ends it
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        kids.append(pid)
    burners = []
    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    deadline = time.monotonic() + args.duration
    was_on = False
    try:
        with open(args.log, "w", buffering=1) as log:
            log.write(f"# pid {os.getpid()} fake fault {args.fault} sim {bool(rt)}\n")
            while time.monotonic() < deadline:
                on = args.fault != "healthy" and os.path.exists(args.control)
                if on != was_on:
                    log.write(f"# fault {'on' if on else 'off'} {time.monotonic_ns()}\n")
                    was_on = on
                    if on and args.fault == "cpu-contention":
                        cpus = sorted(os.sched_getaffinity(0))
                        for k in range(args.burners):
                            burners.append(subprocess.Popen([sys.executable, "-c",
                                f"import os; os.sched_setaffinity(0, {{{cpus[k % len(cpus)]}}})\n"
                                "while True: pass"]))
                    if on and args.fault == "gpu-neighbour":  # its own session, as the real one
                        burners.append(subprocess.Popen(
                            [sys.executable, "-c", f"# {NEIGHBOUR_MARK} (fake)\nimport time\n"
                             "while True: time.sleep(0.05)"], start_new_session=True))
                    if gil is not None and on:
                        gil.start()
                    elif gil is not None:
                        gil.stop()
                    if quota is not None:
                        quota.sync(on)
                if rt is not None:
                    for k in range(4):
                        stub, grid, block = kernels.entries[k % len(kernels.entries)]
                        params = (ctypes.c_void_p * 3)(ctypes.addressof(kernel_ns),
                                                       ctypes.addressof(dbuf),
                                                       ctypes.addressof(dloss))
                        rt.cudaLaunchKernel(stub, grid, block, params, 0, None)
                        if on and args.fault == "sync-heavy":
                            rt.cudaDeviceSynchronize()
                    if on and args.fault == "malloc-churn":
                        for _ in range(8):
                            tmp = ctypes.c_void_p()
                            rt.cudaMalloc(ctypes.byref(tmp), 8 << 20)
                            rt.cudaFree(tmp)
                    rt.cudaDeviceSynchronize()
                else:
                    time.sleep(0.012)
                if on and io is not None:
                    io.sample()  # the real reader of torch_faults.py, on this thread
                elif on and ckpt is not None:
                    ckpt.maybe_save()
                elif saver is not None:
                    saver.start() if on else saver.stop()
                    if on:
                        with saver.lock:
                            pass
                elif on and args.fault in ("slow-worker", "pageable-memcpy", "io-bottleneck",
                                           "main-thread-batches", "tiny-kernels",
                                           "worker-oversubscription", "gpu-bound"):
                    time.sleep(0.02)  # no real analogue without torch: just slower
                log.write(f"{time.monotonic_ns()}\n")
    except KeyboardInterrupt:
        pass
    finally:
        for b in burners:
            b.kill()
            b.wait()
        if gil is not None:
            gil.stop()
        if ckpt is not None:
            ckpt.remove_prev()
        if saver is not None:
            saver.stop()
            saver.ckpt.remove_prev()
        # The forked "workers" are deliberately left for the controller's group kill.


# ---------------------------------------------------------------------------------------------

def default_python():
    c = (sorted(glob.glob("/opt/torch/.venv/bin/python3*"))
         or glob.glob("/opt/torch/.venv/bin/python"))
    c = [x for x in c if os.access(x, os.X_OK) and re.search(r"python3?(\.\d+)?$", x)]
    return min(c, key=len) if c else sys.executable


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--fake-trainer":
        fake_trainer(sys.argv[2:])
        return 0
    p = argparse.ArgumentParser(description="gpuwhy accuracy suite on real PyTorch",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("--gpuwhy", help="the gpuwhy binary (required unless --list-cases)")
    p.add_argument("--out", help="output directory (required unless --list-cases)")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--list-cases", action="store_true",
                   help="print the case names, one a line, and exit")
    p.add_argument("--merge", action="store_true",
                   help="keep the results of other cases already in DIR/summary.json (a suite "
                        "run in parts)")
    p.add_argument("--python", default=default_python(), help="interpreter with torch")
    p.add_argument("--trace-seconds", type=float, default=20)
    p.add_argument("--launch-job-s", type=float, default=20,
                   help="how long the launched case's job runs under trace -- CMD, s")
    p.add_argument("--warmup", type=float, default=12, help="s from trainer start to healthy phase")
    p.add_argument("--healthy-s", type=float, default=6)
    p.add_argument("--settle-s", type=float, default=3)
    p.add_argument("--fault-onset", type=float, default=0,
                   help="switch the fault on this many s after the tracer starts (0: before)")
    p.add_argument("--startup-timeout", type=float, default=60)
    p.add_argument("--attach-timeout", type=float, default=40,
                   help="extra s gpuwhy trace may take beyond --trace-seconds")
    p.add_argument("--budget", type=float, default=530, help="whole-suite wall-clock budget, s")
    p.add_argument("--stop-grace", type=float, default=8,
                   help="s the trainer gets after SIGINT before SIGTERM/SIGKILL to its group")
    p.add_argument("--no-nvml", dest="nvml", action="store_false")
    p.add_argument("--trace-arg", action="append", default=[],
                   help="extra argument for gpuwhy trace (repeatable)")
    p.add_argument("--trainer-arg", action="append", default=[],
                   help="extra argument for torch_faults.py (repeatable), "
                        "e.g. --trainer-arg=--layers=8")
    p.add_argument("--contention-cpus", default="0-3",
                   help="CPUs of the cpu-contention and worker-oversubscription trainers")
    p.add_argument("--burners", type=int, default=12)
    p.add_argument("--slow-worker-ms", type=float, default=300)
    p.add_argument("--pageable-mb", type=int, default=1024)
    p.add_argument("--io-dir", default="")
    p.add_argument("--io-file-mb", type=int, default=1024)
    p.add_argument("--io-reads", type=int, default=48)
    p.add_argument("--io-read-kb", type=int, default=16)
    p.add_argument("--io-throttle-mbps", type=float, default=64,
                   help="read limit (MB/s) for the io case's workers: cgroup v1 blkio, "
                        "else v2 io.max (0: none)")
    p.add_argument("--main-batch-cpu-ms", type=float, default=1.0,
                   help="main-thread-batches: extra Python CPU ms per sample")
    p.add_argument("--neighbour-n", type=int, default=8192,
                   help="gpu-neighbour: bf16 matmul size")
    p.add_argument("--ckpt-mb", type=int, default=512, help="checkpoint: MiB per checkpoint")
    p.add_argument("--ckpt-every-s", type=float, default=2,
                   help="checkpoint: s of training between checkpoints")
    p.add_argument("--oversub-threads", type=int, default=16,
                   help="worker-oversubscription: intra-op threads per worker")
    # (why 8: see torch_faults.py)
    p.add_argument("--oversub-matmuls", type=int, default=8,
                   help="worker-oversubscription: 256x256 matmuls per sample")
    p.add_argument("--quota-cpu-max", default="50000 100000",
                   help="cpu-quota: the group's cpu.max (quota and period, us)")
    p.add_argument("--self-test", action="store_true",
                   help="fake trainer (no torch), short phases, checks clean-up")
    p.add_argument("--sim-lib", default="",
                   help="self-test: sim CUDA lib dir (default: next to gpuwhy)")
    args = p.parse_args()
    if args.list_cases:
        print("\n".join(CASES))
        return 0
    if not args.gpuwhy or not args.out:
        p.error("--gpuwhy and --out are required")
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            p.error(f"unknown case {c}; cases: {', '.join(CASES)}")
    if args.self_test:
        for k, v in (("warmup", 3), ("healthy_s", 2), ("settle_s", 1.5), ("trace_seconds", 5),
                     ("launch_job_s", 8)):
            if p.get_default(k) == getattr(args, k):
                setattr(args, k, v)
        args.nvml = False
        args.stop_grace = min(args.stop_grace, 2)
        args.io_file_mb = min(args.io_file_mb, 64)
        args.ckpt_mb = min(args.ckpt_mb, 16)
        args.burners = min(args.burners, 3)
        sim = args.sim_lib or os.path.join(os.path.dirname(os.path.abspath(args.gpuwhy)), "sim",
                                           "lib")
        args.trainer_arg = args.trainer_arg + ["--sim-lib", sim, "--workers", "1"]
    args.gpuwhy = os.path.abspath(args.gpuwhy)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    if os.geteuid() != 0:
        log("warning: not root; gpuwhy trace will fail")
    state = {}

    def on_signal(signum, frame):
        # Once: a second SIGINT/SIGTERM must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.monotonic()
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "gpuwhy": args.gpuwhy,
            "python": args.python, "trace_seconds": args.trace_seconds, "warmup": args.warmup,
            "healthy_s": args.healthy_s, "settle_s": args.settle_s, "cases": cases,
            "launch_job_s": args.launch_job_s,
            "self_test": args.self_test, "cores": os.cpu_count(), "budget_s": args.budget}
    kept = merged_results(out, cases) if args.merge else []
    if kept:
        meta["kept_from_earlier_runs"] = [r["case"] for r in kept]
        log(f"--merge: keeping {', '.join(meta['kept_from_earlier_runs'])} from summary.json")
    run_capture([args.gpuwhy, "check"], os.path.join(out, "check.txt"), 60)
    base = args.warmup + args.healthy_s + args.trace_seconds + 12
    per_case = base + args.settle_s
    results = []
    try:
        for i, case in enumerate(cases):
            spent = time.monotonic() - t0
            done = [x["case_s"] - (settle_s(args, x["case"]) - args.settle_s)
                    for x in results if x.get("case_s") and not x.get("skipped")]
            if done:
                per_case = max(per_case, statistics.mean(done))
            need = per_case + settle_s(args, case) - args.settle_s
            if spent + need > args.budget:
                log(f"{case}: skipped, {spent:.0f} s spent, ~{need:.0f} s needed, budget "
                    f"{args.budget:.0f} s")
                results.append({"case": case, "expected": CASES[case].expected,
                                "skipped": "budget"})
                continue
            log(f"{case}: start ({i + 1}/{len(cases)}, {spent:.0f} s so far)")
            r = run_case(args, case, out, state)
            g = r.get("gpuwhy") or {}
            top = g.get("top") or {}
            if r.get("skipped"):
                log(f"{case}: skipped: {r['skipped']}")
            else:
                log(f"{case}: {r.get('steps_per_s')} top {top.get('rule')} {top.get('severity')} "
                    f"match {g.get('match')} lost explain {r.get('explain_lost_s')} measured "
                    f"{r.get('measured_lost_s')} errors {r['errors']} ({r['case_s']:.0f} s)")
            results.append(r)
            meta["total_s"] = round(time.monotonic() - t0, 1)
            write_summary(out, meta, in_case_order(kept + results))
    except KeyboardInterrupt:
        log("interrupted; stopping children")
        for key in ("tracer",):
            stop_plain(state.get(key))
        if state.get("trainer") is not None:
            stop_group(state["trainer"], args.stop_grace)
        meta["interrupted"] = True
    meta["total_s"] = round(time.monotonic() - t0, 1)
    write_summary(out, meta, in_case_order(kept + results))
    log(f"done in {meta['total_s']:.0f} s: {os.path.join(out, 'summary.md')}")
    if args.self_test:
        return self_test_check(out, results, meta)
    return 0


def merged_results(out, cases):
    """--merge: the results in DIR/summary.json of cases this run does not repeat, each marked
    with the start of the run that made it."""
    try:
        with open(os.path.join(out, "summary.json")) as f:
            prev = json.load(f)
    except (OSError, ValueError):
        return []
    kept = []
    for r in prev.get("cases") or []:
        if isinstance(r, dict) and r.get("case") in CASES and r["case"] not in cases:
            r.setdefault("run_started", (prev.get("meta") or {}).get("started"))
            kept.append(r)
    return kept


def in_case_order(results):
    order = list(CASES)
    return sorted(results, key=lambda r: order.index(r["case"]))


def self_test_check(out, results, meta):
    problems = ["interrupted"] if meta.get("interrupted") else []
    for r in results:
        if r.get("skipped") and not str(r["skipped"]).startswith("no cgroup v2"):
            problems.append(f"{r['case']}: skipped")
        if r.get("skipped"):
            continue
        if r.get("leftover_pids"):
            problems.append(f"{r['case']}: leftover {r['leftover_pids']}")
        pid = r.get("trainer_pid")
        if pid and alive(pid):
            problems.append(f"{r['case']}: trainer {pid} alive")
        sps = r.get("steps_per_s") or {}
        launched = CASES[r["case"]].launched
        if (not sps.get("job")) if launched else (
                not sps.get("healthy") or not sps.get("faulted_traced")):
            problems.append(f"{r['case']}: no steps/s {sps}")
        if r.get("case_s", 1e9) > (meta["launch_job_s"] + 30 if launched else meta["healthy_s"] +
                                   meta["warmup"] + meta["settle_s"] + meta["trace_seconds"] + 25):
            problems.append(f"{r['case']}: took {r['case_s']} s")
        if r.get("io") and os.path.exists(r["io"]["file"]):
            problems.append(f"{r['case']}: io file left")
        if r.get("checkpoint") and glob.glob(os.path.join(
                r["checkpoint"]["dir"], f"{CKPT_PREFIX}{r.get('trainer_pid')}_*")):
            problems.append(f"{r['case']}: checkpoint files left")
        if r.get("quota") and os.path.exists(r["quota"]["cgroup"]):
            problems.append(f"{r['case']}: cgroup {r['quota']['cgroup']} left")
        bad = [e for e in r.get("errors", []) if "trace overran" in e or "exited" in e
               or "files left" in e or "removing" in e]
        problems += [f"{r['case']}: {e}" for e in bad]
    # No process anywhere still runs this script's fake trainer or burners.
    me = os.getpid()
    for pid, v in proc_table().items():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cl = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ("--fake-trainer" in cl or NEIGHBOUR_MARK in cl
                or ("while True: pass" in cl and "sched_setaffinity" in cl)):
            problems.append(f"orphan {pid}: {cl[:100]}")
    for f in ("summary.json", "summary.md"):
        if not os.path.exists(os.path.join(out, f)):
            problems.append(f"missing {f}")
    print("self-test:", "OK" if not problems else "FAILED")
    for x in problems:
        print("  -", x)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
