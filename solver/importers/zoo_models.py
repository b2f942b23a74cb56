"""Plain ``torch.nn`` definitions of the networks the scheduling papers use, without torchvision.

torchvision's x86_64 wheels on PyPI are built against CUDA torch and do not load next to the CPU
wheel, and we only need the *definitions*, never weights. The layouts follow
torchvision (VGG, ResNet, MobileNetV2) and the common PyTorch U-Net port, so the parameter counts
equal the published ones. Every module is a distinct instance (no shared ``relu`` called twice):
torch.fx names a node after its module, and a shared module would give repeated names.

The classes can be defined without torch; instantiating one without it raises
:class:`MissingDependencyError`.
"""

from __future__ import annotations

from solver.importers._deps import require_torch

try:  # optional extra: the classes below only need it when instantiated
    import torch
    from torch import nn
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess test
    torch = nn = None

__all__ = [
    "ZOO",
    "VGG16",
    "VGG19",
    "ResNet18",
    "ResNet34",
    "ResNet50",
    "UNet",
    "MobileNetV2",
    "TransformerBlock",
]

_Module = nn.Module if nn is not None else object


class _Net(_Module):
    """Base class that fails with an install hint when torch is missing."""

    def __init__(self) -> None:
        require_torch("the model zoo")
        super().__init__()


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act=None) -> nn.Module:
    layers = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ----- VGG (Simonyan & Zisserman 2014; torchvision layout) --------------------------------------
_VGG_BLOCKS = {16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}  # 3x3 convs per block, then a max-pool


class _VGG(_Net):
    def __init__(self, depth: int, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for convs, width in zip(_VGG_BLOCKS[depth], (64, 128, 256, 512, 512), strict=True):
            for _ in range(convs):
                layers += [nn.Conv2d(cin, width, 3, padding=1), nn.ReLU()]
                cin = width
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(),
            nn.Dropout(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class VGG16(_VGG):
    """VGG16 (configuration D): 138,357,544 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(16, num_classes)


class VGG19(_VGG):
    """VGG19 (configuration E): 143,667,240 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(19, num_classes)


# ----- ResNet (He et al. 2015; torchvision v1.5 layout: stride on the 3x3 conv) -----------------
class _BasicBlock(_Net):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU()
        self.downsample = _downsample(cin, planes, stride, self.expansion)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + identity)


class _Bottleneck(_Net):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu3 = nn.ReLU()
        self.downsample = _downsample(cin, planes, stride, self.expansion)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu3(out + identity)


def _downsample(cin: int, planes: int, stride: int, expansion: int):
    if stride == 1 and cin == planes * expansion:
        return None
    return nn.Sequential(
        nn.Conv2d(cin, planes * expansion, 1, stride, bias=False),
        nn.BatchNorm2d(planes * expansion),
    )


class _ResNet(_Net):
    def __init__(self, block: type, counts: list[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (planes, count) in enumerate(zip((64, 128, 256, 512), counts, strict=True)):
            blocks = []
            for j in range(count):
                blocks.append(block(cin, planes, 2 if i > 0 and j == 0 else 1))
                cin = planes * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class ResNet18(_ResNet):
    """ResNet-18: 11,689,512 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(_BasicBlock, [2, 2, 2, 2], num_classes)


class ResNet34(_ResNet):
    """ResNet-34: 21,797,672 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(_BasicBlock, [3, 4, 6, 3], num_classes)


class ResNet50(_ResNet):
    """ResNet-50: 25,557,032 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(_Bottleneck, [3, 4, 6, 3], num_classes)


# ----- U-Net (Ronneberger et al. 2015; same padding, BN, transposed-conv upsampling) ------------
class _DoubleConv(_Net):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.block1 = _conv_bn(cin, cout, 3, act=nn.ReLU)
        self.block2 = _conv_bn(cout, cout, 3, act=nn.ReLU)

    def forward(self, x):
        return self.block2(self.block1(x))


class _Down(_Net):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.conv = _DoubleConv(cin, cout)

    def forward(self, x):
        return self.conv(self.pool(x))


class _Up(_Net):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, 2)
        self.conv = _DoubleConv(cin, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(_Net):
    """U-Net, 3 input channels, 2 classes, 64...1024 channels: 31,037,698 parameters.

    Spatial sizes must be divisible by 16 (no cropping or padding of the skip connections).
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 2) -> None:
        super().__init__()
        self.inc = _DoubleConv(in_channels, 64)
        self.down1, self.down2 = _Down(64, 128), _Down(128, 256)
        self.down3, self.down4 = _Down(256, 512), _Down(512, 1024)
        self.up1, self.up2 = _Up(1024, 512), _Up(512, 256)
        self.up3, self.up4 = _Up(256, 128), _Up(128, 64)
        self.outc = nn.Conv2d(64, num_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.down4(x4)
        x = self.up2(self.up1(x, x4), x3)
        return self.outc(self.up4(self.up3(x, x2), x1))


# ----- MobileNetV2 (Sandler et al. 2018; torchvision layout, width 1.0) --------------------------
class _InvertedResidual(_Net):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1, act=nn.ReLU6)]
        layers += [
            _conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
            _conv_bn(hidden, cout, 1),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


# expansion t, channels c, repeats n, first stride s (Sandler et al., Table 2)
# fmt: off
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                 (6, 160, 3, 2), (6, 320, 1, 1))
# fmt: on


class MobileNetV2(_Net):
    """MobileNetV2, width 1.0: 3,504,872 parameters."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers = [_conv_bn(3, 32, 3, 2, act=nn.ReLU6)]
        cin = 32
        for t, c, n, s in _MOBILENET_V2:
            for i in range(n):
                layers.append(_InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ----- Transformer encoder block (Vaswani et al. 2017; post-norm, as nn.TransformerEncoderLayer) -
class TransformerBlock(_Net):
    """One encoder block on ``(batch, sequence, d_model)`` inputs, attention written out in ops.

    Same parameters as ``nn.TransformerEncoderLayer(d_model, heads, d_ff)`` (3,152,384 for the
    defaults), but with separate q/k/v projections and explicit matmuls, so that every operator
    autograd sees becomes a node (``nn.MultiheadAttention`` would be one opaque leaf).
    """

    def __init__(self, d_model: int = 512, heads: int = 8, d_ff: int = 2048, p: float = 0.1):
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.scale = self.head_dim**-0.5
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.attn_drop, self.out = nn.Dropout(p), nn.Linear(d_model, d_model)
        self.drop1, self.norm1 = nn.Dropout(p), nn.LayerNorm(d_model)
        self.ff1, self.act, self.ff_drop = nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(p)
        self.ff2, self.drop2, self.norm2 = (
            nn.Linear(d_ff, d_model),
            nn.Dropout(p),
            nn.LayerNorm(d_model),
        )

    def forward(self, x):
        heads = (x.size(0), x.size(1), self.heads, self.head_dim)
        q, k, v = (f(x).view(heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        context = self.attn_drop(scores.softmax(dim=-1)) @ v
        context = context.transpose(1, 2).reshape(x.size(0), x.size(1), -1)
        x = self.norm1(x + self.drop1(self.out(context)))
        ff = self.ff2(self.ff_drop(self.act(self.ff1(x))))
        return self.norm2(x + self.drop2(ff))


#: name -> (class, default input shape of the bundled graph)
ZOO: dict[str, tuple[type, tuple[int, ...]]] = {
    "vgg16": (VGG16, (32, 3, 224, 224)),
    "vgg19": (VGG19, (32, 3, 224, 224)),
    "resnet18": (ResNet18, (32, 3, 224, 224)),
    "resnet34": (ResNet34, (32, 3, 224, 224)),
    "resnet50": (ResNet50, (32, 3, 224, 224)),
    "unet": (UNet, (8, 3, 256, 256)),
    "mobilenetv2": (MobileNetV2, (32, 3, 224, 224)),
    "transformer": (TransformerBlock, (32, 256, 512)),
}
