"""Small models with the exact key layouts of torchvision's ResNets and timm's DeiTs, their
PyTorch logits on a batch, and the check that Ember's exports load back into them.

    pip install torch torchvision timm
    python3 make_fixtures.py            # writes the fixtures below (fixed seeds)
    python3 make_fixtures.py --check D  # loads D/<name>.safetensors (written by `ember export`)
                                        # into the same PyTorch models, strictly, compares the
                                        # logits and writes exports.json (their CRC-32s)

Fixtures (CI never runs this script; Ember's tests read what it wrote):
- resnet18-w8.pth:  torchvision ResNet-18 layout, ImageNet stem, width 8, 5 classes (f32)
- resnet50-w4.pth:  torchvision ResNet-50 layout (bottlenecks), width 4, 3 classes (f32)
- deit-d128.safetensors: timm VisionTransformer as DeiT (no distillation token), dim 128,
  2 blocks, 2 heads of 64, 16x16 patches of 32x32 images, 4 classes, stored as F16
- expected.safetensors: `<name>.input` (a batch of 2 images) and `<name>.logits` (PyTorch's,
  in f32, eval mode); `folder.<class>` the images of folder/ as torchvision's ImageNet
  evaluation transform gives them (Resize(256), CenterCrop(224), ToTensor, Normalize), and
  `folder.<class>.logits` resnet18-w8's logits on them
- folder/<class>/image.png: two PNG images of odd sizes in an ImageFolder of two classes
- distilled.safetensors, resnet18-model.pth, resnet18-script.pt: bad inputs (a distilled
  DeiT, a whole pickled model, a TorchScript archive)
"""
import json
import sys
import zlib
from pathlib import Path

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
from timm.models.vision_transformer import VisionTransformer
from safetensors.torch import save_file, load_file
from PIL import Image
from torchvision import transforms

HERE = Path(__file__).parent


def narrow_resnet(block, layers, width, classes):
    """torchvision's ResNet with `width` channels in its first stage (64 in torchvision)."""
    m = ResNet.__new__(ResNet)
    nn.Module.__init__(m)
    m._norm_layer = nn.BatchNorm2d
    m.inplanes, m.dilation, m.groups, m.base_width = width, 1, 1, 64
    m.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
    m.bn1 = nn.BatchNorm2d(width)
    m.relu = nn.ReLU(inplace=True)
    m.maxpool = nn.MaxPool2d(3, 2, 1)
    m.layer1 = m._make_layer(block, width, layers[0])
    m.layer2 = m._make_layer(block, 2 * width, layers[1], stride=2)
    m.layer3 = m._make_layer(block, 4 * width, layers[2], stride=2)
    m.layer4 = m._make_layer(block, 8 * width, layers[3], stride=2)
    m.avgpool = nn.AdaptiveAvgPool2d((1, 1))
    m.fc = nn.Linear(8 * width * block.expansion, classes)
    return m


def randomise_norms(m):
    """Batch-norm statistics and affines away from their defaults, so that a swapped name
    (mean for var, gamma for beta) changes the logits."""
    g = torch.Generator().manual_seed(7)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            n = mod.num_features
            mod.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            mod.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            mod.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
            mod.num_batches_tracked.fill_(3)


def folder_image(w, h, g):
    """A smooth RGB image with some edges (PNG: both sides decode the same pixels)."""
    y, x = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    rgb = torch.stack([x, y, (x * 7).sin() * 0.5 + 0.5]) * 200
    rgb[:, h // 3: h // 2, w // 4: w // 2] = 255
    rgb[:, (y * 24).long() % 2 == (x * 24).long() % 2] *= 0.5  # a checkerboard: sharp edges
    return Image.fromarray(rgb.clamp(0, 255).byte().permute(1, 2, 0).numpy())


def imagenet_eval(img):
    t = transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    return t(img.convert("RGB")).contiguous()


def models():
    torch.manual_seed(0)
    r18 = narrow_resnet(BasicBlock, [2, 2, 2, 2], 8, 5)
    r50 = narrow_resnet(Bottleneck, [3, 4, 6, 3], 4, 3)
    deit = VisionTransformer(img_size=32, patch_size=16, embed_dim=128, depth=2, num_heads=2,
                             mlp_ratio=4, qkv_bias=True, num_classes=4)
    with torch.no_grad():
        randomise_norms(r18)
        randomise_norms(r50)
        for p in deit.parameters():  # timm zero-initialises biases and the head
            p.copy_(torch.randn_like(p) * 0.2)
        for p in deit.parameters():  # values an F16 file holds exactly
            p.copy_(p.half().float())
    return {
        "resnet18-w8": (r18, (2, 3, 64, 64)),
        "resnet50-w4": (r50, (2, 3, 64, 64)),
        "deit-d128": (deit, (2, 3, 32, 32)),
    }


def write():
    expected = {}
    g = torch.Generator().manual_seed(1)
    zoo = models()
    for name, (m, shape) in zoo.items():
        m.eval()
        x = torch.randn(*shape, generator=g)
        with torch.no_grad():
            expected[f"{name}.input"] = x
            expected[f"{name}.logits"] = m(x)
        if name.startswith("deit"):
            sd = {k: v.half().contiguous() for k, v in m.state_dict().items()}
            save_file(sd, HERE / f"{name}.safetensors")
        else:
            torch.save(m.state_dict(), HERE / f"{name}.pth")
    for cls, (w, h) in [("cat", (301, 257)), ("dog", (250, 399))]:
        img = folder_image(w, h, g)
        (HERE / "folder" / cls).mkdir(parents=True, exist_ok=True)
        img.save(HERE / "folder" / cls / "image.png")
        img = Image.open(HERE / "folder" / cls / "image.png")
        expected[f"folder.{cls}"] = imagenet_eval(img).half()  # F16: 0.002 of rounding
        with torch.no_grad():
            logits = zoo["resnet18-w8"][0](imagenet_eval(img).unsqueeze(0))
        expected[f"folder.{cls}.logits"] = logits
    save_file(expected, HERE / "expected.safetensors")
    # bad inputs
    distilled = VisionTransformer(img_size=32, patch_size=16, embed_dim=64, depth=1, num_heads=1,
                                  num_classes=4, class_token=True)
    sd = {k: v.half() for k, v in distilled.state_dict().items()}
    sd["dist_token"] = torch.zeros(1, 1, 64, dtype=torch.half)
    sd["head_dist.weight"] = torch.zeros(4, 64, dtype=torch.half)
    sd["head_dist.bias"] = torch.zeros(4, dtype=torch.half)
    save_file(sd, HERE / "distilled.safetensors")
    tiny = narrow_resnet(BasicBlock, [1, 1, 1, 1], 2, 2)
    torch.save(tiny, HERE / "resnet18-model.pth")
    torch.jit.script(tiny).save(str(HERE / "resnet18-script.pt"))


def check(exports: Path):
    digests = {}
    want = load_file(HERE / "expected.safetensors")
    for name, (m, _) in models().items():
        file = exports / f"{name}.safetensors"
        sd = load_file(file)
        m.load_state_dict(sd, strict=True)
        m.eval()
        with torch.no_grad():
            got = m(want[f"{name}.input"])
        err = (got - want[f"{name}.logits"]).abs().max().item()
        scale = want[f"{name}.logits"].abs().max().item()
        assert err <= 1e-4 * max(scale, 1.0), f"{name}: logits differ by {err}"
        digests[name] = zlib.crc32(file.read_bytes())
        print(f"{name}: loaded strictly, logits within {err:.2e}, crc32 {digests[name]:08x}")
    (HERE / "exports.json").write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(Path(sys.argv[2]))
    else:
        write()
