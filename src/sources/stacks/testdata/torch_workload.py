# PyTorch workload for gw_stacks_try on the GPU machine: torch.cuda.synchronize() (which calls
# cudaDeviceSynchronize) from line 12 inside step(), called from train() at line 18.
import sys

import torch

x = torch.randn(2048, 2048, device="cuda")


def step():
    y = x @ x
    torch.cuda.synchronize()
    return y


def train(steps):
    for _ in range(steps):
        step()


print("ready", flush=True)
sys.stdin.readline()
train(3)
print("called", flush=True)
sys.stdin.readline()
