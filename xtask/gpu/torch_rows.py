#!/usr/bin/env python3
"""PyTorch timings of the ops Ember's bench rows run: the PyTorch column of `xtask gpu-run`.

Usage: torch_rows.py REQUEST.json OUT.json

REQUEST is a list of {"row": Ember row id, "op": name, "dims": sizes}; ops are `matmul`
([m, k] @ [k, n]), `matmul_at` ([k, m].T @ [k, n], dims [m, k, n]), and on [n, c, h, w] with one
value per channel: `prelu_fwd`, `prelu_bwd` (dx and dα), `affine_fwd` (x·α + β) and `affine_bwd`
(dx, dα, dβ). OUT gets {"torch": version, "device": name, "tf32": bool, "rows": {row: ns}}: the
mean time of one call followed by a device synchronisation, as every Ember device row waits for
its device after each call; f32 throughout. Runs on CUDA when torch sees a GPU, else on the CPU.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def mean_ns(fn, device, min_seconds=0.3):
    """Mean time of fn() and a synchronisation, over batches doubled until one takes min_seconds."""
    for _ in range(3):
        fn()
        sync(device)
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
            sync(device)
        took = time.perf_counter() - start
        if took >= min_seconds:
            return took / n * 1e9
        n *= 2


def build(op, dims, device):
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, grad=False):
        t = torch.rand(*shape, generator=g, device=device) * 2 - 1
        return t.requires_grad_(grad)

    if op == "matmul":
        m, k, n = dims
        a, b = rand(m, k), rand(k, n)
        return lambda: a @ b
    if op == "matmul_at":
        m, k, n = dims
        x, y = rand(k, m), rand(k, n)
        return lambda: x.t() @ y
    n, c, h, w = dims
    shape = (1, c, 1, 1)
    if op == "prelu_fwd":
        x, a = rand(n, c, h, w), rand(c)
        return lambda: F.prelu(x, a)
    if op == "affine_fwd":
        x, a, b = rand(n, c, h, w), rand(c), rand(c)
        return lambda: x * a.view(shape) + b.view(shape)
    dy = rand(n, c, h, w)
    if op == "prelu_bwd":
        x, a = rand(n, c, h, w, grad=True), rand(c, grad=True)
        y = F.prelu(x, a)
        return lambda: torch.autograd.grad(y, (x, a), dy, retain_graph=True)
    if op == "affine_bwd":
        x, a, b = rand(n, c, h, w, grad=True), rand(c, grad=True), rand(c, grad=True)
        y = x * a.view(shape) + b.view(shape)
        return lambda: torch.autograd.grad(y, (x, a, b), dy, retain_graph=True)
    raise SystemExit(f"torch_rows.py: unknown op {op!r}")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        request = json.load(f)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    rows, done = {}, {}
    for item in request:
        key = (item["op"], tuple(item["dims"]))
        if key not in done:
            done[key] = mean_ns(build(item["op"], item["dims"], device), device)
            print(f"{item['op']} {item['dims']}: {done[key] / 1e3:.1f} µs", file=sys.stderr)
        rows[item["row"]] = done[key]
    out = {
        "torch": torch.__version__,
        "device": name,
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "rows": rows,
    }
    with open(sys.argv[2] + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


if __name__ == "__main__":
    main()
