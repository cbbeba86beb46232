"""A small, steady PyTorch training loop for overhead and diagnosis runs on the GPU machine.

A transformer encoder trained on synthetic token batches produced by a DataLoader with worker
processes (each sample costs a little real CPU work, like decoding/augmentation). Every step
ends with torch.cuda.synchronize(); the end time of every step (CLOCK_MONOTONIC, ns) is
appended to --log so a controller can compute throughput over any time window afterwards.

`--data gpu` drops the DataLoader: each batch is drawn on the GPU (torch.randint), so the
process is one thread launching kernels with nothing else competing for the CPU — the quiet
launch-heavy shape that overhead runs need. `--d-model 2048 --layers 8 --seq 512` makes the
kernels large (a GPU-bound loop).

`--compile-mode reduce-overhead` compiles with CUDA Graphs (cudagraph trees replay each step).
`--vary-seq N --new-shape-every K` (with --data gpu) draws each step's sequence length from
[seq, seq+N): every K-th step a length not seen before, the others one already seen, so a
reduce-overhead job records a new graph every K steps (the dynamic-shapes pitfall) while the
average step does the same work throughout; those steps' log lines end in " new".
`--profile-steps N --profile-out F`: after --profile-after steps, torch.profiler counts the
kernels the GPU ran and the launch calls over N steps, written to F as JSON (an independent
count for gpuwhy's launch figures), then the job goes on.

Usage: python3 torch_train.py --duration 300 --log steps.txt [--workers 4] [--batch 64]
                              [--data loader|gpu] [--d-model 256] [--layers 4] [--compile]
                              [--compile-mode reduce-overhead] [--vary-seq N --new-shape-every K]
                              [--profile-steps N --profile-out F [--profile-after S]]
"""
import json
import random
import argparse
import os
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class SyntheticTokens(Dataset):
    def __init__(self, length, seq, vocab, cpu_work):
        self.length, self.seq, self.vocab, self.cpu_work = length, seq, vocab, cpu_work

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, self.vocab, (self.seq,), generator=g)
        acc = 0
        for k in range(self.cpu_work):  # per-sample CPU work, like decoding
            acc += (k * i) % 7
        return x, (x + acc) % self.vocab


class Model(nn.Module):
    def __init__(self, vocab, d_model, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, x):
        return self.out(self.enc(self.emb(x)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=120)
    p.add_argument("--log", required=True)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--cpu-work", type=int, default=2000)
    p.add_argument("--data", choices=("loader", "gpu"), default="loader",
                   help="loader: DataLoader workers make each batch; gpu: drawn on the GPU")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor: Triton kernels)")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode (reduce-overhead: CUDA Graphs); implies --compile")
    p.add_argument("--vary-seq", type=int, default=0)
    p.add_argument("--new-shape-every", type=int, default=0)
    p.add_argument("--profile-steps", type=int, default=0)
    p.add_argument("--profile-after", type=int, default=60)
    p.add_argument("--profile-out", default=None)
    args = p.parse_args()
    if args.compile_mode:
        args.compile = True

    torch.manual_seed(0)
    dev = torch.device("cuda")
    vocab = 8192
    model = Model(vocab, args.d_model, args.layers).to(dev)
    step_model = (torch.compile(model, mode=args.compile_mode) if args.compile else model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    new_shape = [False]
    if args.data == "gpu":
        rng = random.Random(0)
        unseen = list(range(args.seq, args.seq + max(1, args.vary_seq)))
        rng.shuffle(unseen)
        seen = [unseen.pop()]

        def gpu_batches():
            step = 0
            while True:
                step += 1
                seq = seen[0]
                new_shape[0] = False
                if args.vary_seq > 1:
                    if args.new_shape_every and step % args.new_shape_every == 0 and unseen:
                        seen.append(unseen.pop())
                        seq = seen[-1]
                        new_shape[0] = True
                    else:
                        seq = rng.choice(seen)
                x = torch.randint(0, vocab, (args.batch, seq), device=dev)
                yield x, (x + 1) % vocab
        loader = gpu_batches()
    else:
        data = SyntheticTokens(10_000_000, args.seq, vocab, args.cpu_work)
        loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                            pin_memory=True, persistent_workers=args.workers > 0, shuffle=False)
    deadline = time.monotonic() + args.duration
    prof = None
    steps = 0
    with open(args.log, "w", buffering=1) as log:
        log.write(f"# pid {os.getpid()} batch {args.batch}\n")
        for x, y in loader:
            steps += 1
            if args.profile_steps and steps == args.profile_after:
                torch.cuda.synchronize()
                prof = torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU,
                                torch.profiler.ProfilerActivity.CUDA])
                prof.__enter__()
            if prof is not None and steps == args.profile_after + args.profile_steps:
                torch.cuda.synchronize()
                prof.__exit__(None, None, None)
                write_profile(prof, args.profile_steps, args.profile_out)
                prof = None
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(step_model(x).view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            log.write(f"{time.monotonic_ns()}{' new' if new_shape[0] else ''}\n")
            if time.monotonic() > deadline:
                break


def write_profile(prof, steps, path):
    """Kernels the GPU ran (CUPTI kernel records, graph nodes included) and launch calls."""
    kernels, calls = 0, {}
    names = {}
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if dev is not None and str(dev).endswith("CUDA"):
            if e.name.startswith(("Memcpy", "Memset")):
                continue
            kernels += 1
            names[e.name] = names.get(e.name, 0) + 1
        elif e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx",
                        "cudaLaunchKernelExC", "cudaGraphLaunch", "cuGraphLaunch"):
            calls[e.name] = calls.get(e.name, 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:10]
    with open(path, "w") as f:
        json.dump({"steps": steps, "kernels": kernels, "kernels_per_step": kernels / steps,
                   "launch_calls": calls, "top": top}, f, indent=1)


if __name__ == "__main__":
    main()
