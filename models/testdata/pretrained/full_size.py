"""Full-size round trip through `ember export`: torchvision's ResNet-18 and ResNet-50 and timm's
DeiT-Ti (random weights, nothing downloaded) saved with torch.save(state_dict), exported by Ember
as safetensors, loaded back into fresh PyTorch models with strict=True, logits compared.

    pip install torch torchvision timm
    python3 full_size.py PATH/TO/ember      # writes its files under /tmp/ember-full-size
"""
import os, subprocess, sys, torch, torchvision, timm
from safetensors.torch import load_file
ember = sys.argv[1]
os.makedirs("/tmp/ember-full-size", exist_ok=True)
torch.manual_seed(0)
x = torch.randn(2, 3, 224, 224)
for name, make, model in [
    ("resnet18", lambda: torchvision.models.resnet18(), "resnet18"),
    ("resnet50", lambda: torchvision.models.resnet50(), "resnet50"),
    ("deit_tiny", lambda: timm.create_model("deit_tiny_patch16_224", pretrained=False), "deit-ti"),
]:
    m = make().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    torch.save(m.state_dict(), f"/tmp/ember-full-size/{name}.pth")
    out = f"/tmp/ember-full-size/{name}.safetensors"
    r = subprocess.run([ember, "export", "--checkpoint", f"/tmp/ember-full-size/{name}.pth", "--model", model,
                        "--out", out, "--overwrite"], capture_output=True, text=True)
    print(r.stdout.strip(), r.stderr.strip()[-300:])
    fresh = make().eval()
    fresh.load_state_dict(load_file(out), strict=True)
    with torch.no_grad():
        d = (fresh(x) - m(x)).abs().max().item()
    print(f"{name}: ember export of torch.save(state_dict) loaded with strict=True; logits differ by {d}")
