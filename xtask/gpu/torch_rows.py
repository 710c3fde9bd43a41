#!/usr/bin/env python3
"""PyTorch timings of the ops Ember's bench rows run: the PyTorch column of `xtask gpu-run`.

Usage: torch_rows.py REQUEST.json OUT.json

REQUEST is a list of {"row": Ember row id, "op": name, "dims": sizes}; ops are `matmul`
([m, k] @ [k, n]), `matmul_at` ([k, m].T @ [k, n], dims [m, k, n]), and on [n, c, h, w] with one
value per channel: `prelu_fwd`, `prelu_bwd` (dx and dα), `affine_fwd` (x·α + β) and `affine_bwd`
(dx, dα, dβ); `model_step` (dims [batch], with "model": an Ember model name and "threads": CPU
threads) is one training step — forward, cross-entropy, backward, Adam — of the same model as
Ember's zoo defines it (`model_step_module` below), at CIFAR-10's shapes (MNIST's for LeNet-5,
FSDD's for the GRU); `model_infer` (the same keys) is one inference step of it — `eval()`,
`no_grad`, the logits of a batch. OUT gets {"torch": version, "device": name, "tf32": bool, "rows": {row:
ns}}: the mean time of one call followed by a device synchronisation, as every Ember device row
waits for its device after each call; f32 throughout (on CUDA, `rows_tf32` has the model steps
again with TF32 matmuls and convolutions, the precision of Burn's CUDA matmul). Runs on CUDA when
torch sees a GPU, else on the CPU.
"""
import json
import sys
import time

import torch
import torch.nn as nn
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


class LeNet5(nn.Module):
    """Ember's LeNet-5 (`models/src/lenet.rs`): 28 × 28 grayscale, ReLU."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def conv_bn(cin, cout, k, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)
    )


class Block(nn.Module):
    """Ember's basic residual block (`models/src/resnet.rs`)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a, self.b = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, 1)
        self.short = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        skip = x if self.short is None else self.short(x)
        return F.relu(self.b(F.relu(self.a(x))) + skip)


class ResNet18Cifar(nn.Module):
    """ResNet-18 with the CIFAR stem (3 × 3 stem convolution, no max-pool) at `width`."""

    def __init__(self, width):
        super().__init__()
        self.stem = conv_bn(3, width, 3, 1)
        blocks, cin = [], width
        for stage in range(4):
            cout = width << stage
            for i in range(2):
                blocks.append(Block(cin, cout, 2 if stage > 0 and i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.stem(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Affine(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.alpha, self.beta = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return x * self.alpha + self.beta


class ResMlpS12(nn.Module):
    """ResMLP-S12 in its CIFAR configuration (4 × 4 patches, d 384, 12 blocks)."""

    def __init__(self, d=384, depth=12, patches=64):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                dict(
                    norm1=Affine(d),
                    cross=nn.Linear(patches, patches),
                    norm2=Affine(d),
                    fc1=nn.Linear(d, 4 * d),
                    fc2=nn.Linear(4 * d, d),
                )
            )
            for _ in range(depth)
        )
        self.scales = nn.ParameterList(nn.Parameter(torch.full((d,), 0.1)) for _ in range(2 * depth))
        self.norm, self.head = Affine(d), nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        for i, b in enumerate(self.blocks):
            x = x + self.scales[2 * i] * b["cross"](b["norm1"](x).transpose(1, 2)).transpose(1, 2)
            x = x + self.scales[2 * i + 1] * b["fc2"](F.gelu(b["fc1"](b["norm2"](x))))
        return self.head(self.norm(x).mean(1))


class DeitTi(nn.Module):
    """DeiT-Ti on 4 × 4 patches of 32 × 32 images (d 192, 12 blocks, 3 heads, no dropout)."""

    def __init__(self, d=192, depth=12, heads=3, patches=64):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, patches + 1, d))
        layer = lambda: nn.TransformerEncoderLayer(
            d, heads, 4 * d, 0.0, F.gelu, 1e-6, batch_first=True, norm_first=True
        )
        self.blocks = nn.ModuleList(layer() for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


class GruClassifier(nn.Module):
    """Ember's GRU classifier: 2 × 256 GRU layers, logits from each sequence's last valid step."""

    def __init__(self, features=39, hidden=256):
        super().__init__()
        self.gru = nn.GRU(features, hidden, 2, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x, lengths):
        h, _ = self.gru(x)
        last = h[torch.arange(h.shape[0]), lengths - 1]
        return self.head(last)


FSDD_STEPS = 48


def model_step_module(model):
    """The PyTorch form of Ember's model `model` and the (channels, side) of its images."""
    return {
        "lenet5": (LeNet5, (1, 28)),
        "resnet18-cifar": (lambda: ResNet18Cifar(64), (3, 32)),
        "resnet18-cifar-w16": (lambda: ResNet18Cifar(16), (3, 32)),
        "resmlp-s12": (ResMlpS12, (3, 32)),
        "deit-ti": (DeitTi, (3, 32)),
        "gru": (GruClassifier, None),
    }[model]


def model_step(item, device, train=True):
    """One training step of `item["model"]` at batch `item["dims"][0]` (`train`), or one
    inference step (`eval()`, `no_grad`, the logits)."""
    make, image = model_step_module(item["model"])
    if device.type == "cpu" and "threads" in item:
        torch.set_num_threads(int(item["threads"]))
    batch = item["dims"][0]
    torch.manual_seed(0)
    net = make().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    targets = torch.arange(batch, device=device) % 10
    if image is None:
        x = torch.randn(batch, FSDD_STEPS, 39, device=device)
        lengths = FSDD_STEPS - torch.arange(batch, device=device) % (FSDD_STEPS // 2)
        forward = lambda: net(x, lengths)
    else:
        c, side = image
        x = torch.randn(batch, c, side, side, device=device)
        forward = lambda: net(x)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(forward(), targets).backward()
        opt.step()

    def infer():
        with torch.no_grad():
            return forward()

    if train:
        return step
    net.eval()
    return infer


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
    rows, rows_tf32, done = {}, {}, {}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for item in request:
        key = (item["op"], tuple(item["dims"]), item.get("model"), item.get("threads"))
        if key not in done:
            if item["op"] in ("model_step", "model_infer"):
                fn = model_step(item, device, item["op"] == "model_step")
            else:
                fn = build(item["op"], item["dims"], device)
            done[key] = mean_ns(fn, device)
            print(f"{key}: {done[key] / 1e3:.1f} µs", file=sys.stderr)
        rows[item["row"]] = done[key]
        if item["op"] in ("model_step", "model_infer") and device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            train = item["op"] == "model_step"
            rows_tf32[item["row"]] = mean_ns(model_step(item, device, train), device)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    out = {
        "torch": torch.__version__,
        "device": name,
        "tf32": False,
        "rows": rows,
        "rows_tf32": rows_tf32,
    }
    with open(sys.argv[2] + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


if __name__ == "__main__":
    main()
