"""NCCL on one GPU (world size 1), for the record that gpuwhy captures real NCCL collectives.

Initialises torch.distributed with the NCCL backend (rank 0 of 1, TCP rendezvous on 127.0.0.1),
then makes --steps steps of: a matmul, dist.all_reduce of a --mb MiB tensor, and a
torch.cuda.synchronize(). It writes what it did to --out as JSON: the all-reduce calls it made,
their bytes, the libnccl it mapped (from /proc/self/maps), and the steps' times.

Usage: python3 nccl_world1.py --steps 300 --mb 4 --out /tmp/nccl.json
Run it under `gpuwhy trace -- python3 nccl_world1.py …` and compare the ncclAllReduce rows.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--mb", type=float, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--port", type=int, default=29533)
    a = p.parse_args()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{a.port}", rank=0,
                            world_size=1, device_id=torch.device("cuda", 0))
    n = int(a.mb * (1 << 20) / 4)
    t = torch.ones(n, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    # The first collective makes NCCL's communicator (lazily, in PyTorch): not counted below.
    dist.all_reduce(t)
    torch.cuda.synchronize()
    start = time.monotonic()
    calls = 0
    for _ in range(a.steps):
        w = torch.tanh(w @ w)
        dist.all_reduce(t)
        calls += 1
        torch.cuda.synchronize()
    elapsed = time.monotonic() - start
    libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if "libnccl" in line and len(line.split()) >= 6})
    dist.destroy_process_group()
    with open(a.out, "w") as f:
        json.dump({"pid": os.getpid(), "all_reduce_calls_in_loop": calls, "warmup_calls": 1,
                   "bytes_each": n * 4, "libnccl": libs, "loop_s": round(elapsed, 3),
                   "nccl_version": ".".join(map(str, torch.cuda.nccl.version()))}, f, indent=1)


if __name__ == "__main__":
    main()
