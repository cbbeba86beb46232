"""A small, steady PyTorch training loop for overhead and diagnosis runs on the GPU machine.

A transformer encoder trained on synthetic token batches produced by a DataLoader with worker
processes (each sample costs a little real CPU work, like decoding/augmentation). Every step
ends with torch.cuda.synchronize(); the end time of every step (CLOCK_MONOTONIC, ns) is
appended to --log so a controller can compute throughput over any time window afterwards.

`--data gpu` drops the DataLoader: each batch is drawn on the GPU (torch.randint), so the
process is one thread launching kernels with nothing else competing for the CPU — the quiet
launch-heavy shape that overhead runs need. `--d-model 2048 --layers 8 --seq 512` makes the
kernels large (a GPU-bound loop).

Usage: python3 torch_train.py --duration 300 --log steps.txt [--workers 4] [--batch 64]
                              [--data loader|gpu] [--d-model 256] [--layers 4] [--compile]
"""
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
    args = p.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    vocab = 8192
    model = Model(vocab, args.d_model, args.layers).to(dev)
    step_model = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    if args.data == "gpu":
        def gpu_batches():
            while True:
                x = torch.randint(0, vocab, (args.batch, args.seq), device=dev)
                yield x, (x + 1) % vocab
        loader = gpu_batches()
    else:
        data = SyntheticTokens(10_000_000, args.seq, vocab, args.cpu_work)
        loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                            pin_memory=True, persistent_workers=args.workers > 0, shuffle=False)
    deadline = time.monotonic() + args.duration
    with open(args.log, "w", buffering=1) as log:
        log.write(f"# pid {os.getpid()} batch {args.batch}\n")
        for x, y in loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(step_model(x).view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            log.write(f"{time.monotonic_ns()}\n")
            if time.monotonic() > deadline:
                break


if __name__ == "__main__":
    main()
