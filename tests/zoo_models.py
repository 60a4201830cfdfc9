"""A zoo of model definitions in the styles of the neural-network verification community
(issue 18, item 4), each with the outcome NCET gives as written and the one expected with
`rewrite=True`.

Every class here is written for this test suite: it imitates the way a community writes its
models (auto_LiRPA's examples, alpha-beta-CROWN's `model_defs.py`, convex_adversarial,
CROWN-IBP, COLT, VNN-COMP benchmarks, kuangliu's pytorch-cifar, TRADES, torchvision), not
their code. Widths and input sizes are tiny so that each entry converts and is checked in a
fraction of a second; torchvision itself is not imported.

`ZOO` is the table: one `ZooEntry` per model. `as_written` is what `ncet.diagnose` reports
today ("converts", or the reason codes of its errors in order of first appearance);
`with_rewrite` is what the rules of issue 18 should give with `rewrite=True`:

* an in-place form becomes out-of-place when the tensor it overwrites is not a graph input,
  a parameter or a buffer (nor a view of one), and neither it nor a tensor that may share
  its memory is read afterwards;
* `x.size(0)`, `x.size()[0]` or `x.shape[0]` used only as the leading size of a
  `view`/`reshape` of that same tensor becomes static (`view(n, -1)` -> `flatten(1)`,
  `view(n, d1, ..., dk)` with static sizes -> `view(-1, d1, ..., dk)`); a further `-1` after
  the leading slot, or any other use of a size, is left alone;
* parameters of `forward()` beyond the given input shapes that have defaults are bound to
  their defaults.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

CONVERTS = "converts"
"""The outcome of a model that converts (`diagnose(...).ok`)."""

Outcome = str | tuple[str, ...]
"""CONVERTS, or the reason codes `diagnose` reports, deduplicated in order of first appearance."""


def seeded(build: Callable[..., nn.Module], seed: int, *args, **kwargs) -> nn.Module:
    """`build(*args, **kwargs)` (a model class or a function returning a model) run under
    `seed`, the global RNG left as it was; BatchNorm layers get non-trivial statistics and
    affine parameters; the model is returned in evaluation mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build(*args, **kwargs)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.running_mean.uniform_(-0.5, 0.5)
                    module.running_var.uniform_(0.5, 2.0)
                    if module.affine:
                        module.weight.uniform_(0.5, 1.5)
                        module.bias.uniform_(-0.5, 0.5)
    return model.eval()


# --- shared pieces --------------------------------------------------------------------------


class Flatten(nn.Module):
    """The user-defined flatten of convex_adversarial, CROWN-IBP and alpha-beta-CROWN."""

    def forward(self, x):
        return x.view(x.size(0), -1)


class FlattenSizeIndex(nn.Module):
    """A flatten spelled with `x.size()[0]` and a packed shape tuple."""

    def forward(self, x):
        return x.view((x.size()[0], -1))


class FlattenShape(nn.Module):
    """A flatten spelled with `x.shape[0]` and reshape."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Normalization(nn.Module):
    """Per-channel input normalisation with buffers (alpha-beta-CROWN, ERAN, VNN-COMP)."""

    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x):
        return (x - self.mean) / self.std


# --- MLPs and CNNs in nn.Sequential ---------------------------------------------------------


def lirpa_mlp_3layer(in_ch=1, in_dim=8, width=16):
    """auto_LiRPA examples/vision/models: mlp_3layer with nn.Flatten."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_ch * in_dim * in_dim, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, 10))


def lirpa_cnn_4layer(in_ch=3, in_dim=8, width=2, linear_size=16):
    """auto_LiRPA: cnn_4layer, strided convolutions then nn.Flatten."""
    return nn.Sequential(
        nn.Conv2d(in_ch, 4 * width, 4, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4 * width, 8 * width, 4, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * width * (in_dim // 4) ** 2, linear_size), nn.ReLU(),
        nn.Linear(linear_size, 10))


def lirpa_cnn_7layer_bn(in_ch=3, in_dim=8, width=4, linear_size=16):
    """auto_LiRPA: cnn_7layer with BatchNorm2d and BatchNorm1d."""
    return nn.Sequential(
        nn.Conv2d(in_ch, width, 3, stride=1, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, width, 3, stride=1, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.Conv2d(2 * width, 2 * width, 3, stride=1, padding=1), nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(2 * width * (in_dim // 2) ** 2, linear_size), nn.BatchNorm1d(linear_size),
        nn.ReLU(),
        nn.Linear(linear_size, 10))


def vnncomp_mnist_fc(in_dim=8, width=12, depth=4):
    """VNN-COMP mnistfc: a plain stack of Linear/ReLU on a flattened image."""
    layers: list[nn.Module] = [nn.Flatten()]
    features = in_dim * in_dim
    for _ in range(depth):
        layers += [nn.Linear(features, width), nn.ReLU()]
        features = width
    layers.append(nn.Linear(features, 10))
    return nn.Sequential(*layers)


def vnncomp_oval21_base(in_dim=8):
    """VNN-COMP'21 oval21: the 'base' CIFAR net after its normalisation layer."""
    return nn.Sequential(
        Normalization([0.485, 0.456, 0.406], [0.225, 0.225, 0.225]),
        nn.Conv2d(3, 4, 4, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4, 8, 4, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * (in_dim // 4) ** 2, 16), nn.ReLU(),
        nn.Linear(16, 10))


def eran_leaky_cnn(in_dim=8):
    """ERAN / VNN-COMP style CNN with LeakyReLU and average pooling."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.LeakyReLU(0.1),
        nn.AvgPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1), nn.LeakyReLU(0.1),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * (in_dim // 4) ** 2, 10))


def convex_adversarial_mnist(in_dim=8):
    """convex_adversarial: mnist_model() with the user-defined Flatten."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 4, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4, 8, 4, stride=2, padding=1), nn.ReLU(),
        Flatten(),
        nn.Linear(8 * (in_dim // 4) ** 2, 16), nn.ReLU(),
        nn.Linear(16, 10))


def crown_ibp_cnn_2layer(in_ch=3, in_dim=8, width=2, linear_size=16):
    """CROWN-IBP model_defs: model_cnn_2layer with Flatten()."""
    return nn.Sequential(
        nn.Conv2d(in_ch, 4 * width, 4, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4 * width, 8 * width, 4, stride=2, padding=1), nn.ReLU(),
        Flatten(),
        nn.Linear(8 * width * (in_dim // 4) ** 2, linear_size), nn.ReLU(),
        nn.Linear(linear_size, 10))


def crown_ibp_dm_small(in_ch=1, in_dim=8):
    """CROWN-IBP model_defs: IBP_small (DM-small), unpadded convolutions, Flatten()."""
    return nn.Sequential(
        nn.Conv2d(in_ch, 4, 4, stride=2), nn.ReLU(),
        nn.Conv2d(4, 8, 2, stride=1), nn.ReLU(),
        Flatten(),
        nn.Linear(8 * ((in_dim - 4) // 2) ** 2, 16), nn.ReLU(),
        nn.Linear(16, 10))


def abcrown_cnn_4layer_size_index(in_ch=3, in_dim=8):
    """alpha-beta-CROWN model_defs: a cnn_4layer whose Flatten writes view((x.size()[0], -1))."""
    return nn.Sequential(
        nn.Conv2d(in_ch, 4, 4, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(4, 8, 4, stride=2, padding=1), nn.ReLU(),
        FlattenSizeIndex(),
        nn.Linear(8 * (in_dim // 4) ** 2, 16), nn.ReLU(),
        nn.Linear(16, 10))


def abcrown_mlp_shape(in_dim=8):
    """alpha-beta-CROWN model_defs: mnist_fc with a Flatten written with x.shape[0]."""
    return nn.Sequential(
        FlattenShape(),
        nn.Linear(in_dim * in_dim, 16), nn.ReLU(),
        nn.Linear(16, 16), nn.ReLU(),
        nn.Linear(16, 10))


class COLTConvNet(nn.Module):
    """COLT networks.py: ConvMed-like, forward(x, init_lambda=False, skip_norm=False)."""

    def __init__(self, in_dim=8):
        super().__init__()
        self.normalizer = Normalization([0.1307], [0.3081])
        self.conv1 = nn.Conv2d(1, 4, 5, stride=2, padding=2)
        self.conv2 = nn.Conv2d(4, 8, 4, stride=2, padding=1)
        self.fc1 = nn.Linear(8 * (in_dim // 4) ** 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x, init_lambda=False, skip_norm=False):
        if not skip_norm:
            x = self.normalizer(x)
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class COLTFC(nn.Module):
    """COLT networks.py: FFNN with a defaulted flag the plain forward never reads."""

    def __init__(self, in_dim=8, width=16):
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Flatten(), nn.Linear(in_dim * in_dim, width), nn.ReLU(),
            nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))

    def forward(self, x, init_lambda=False):
        return self.blocks(x)


class FeatureNet(nn.Module):
    """A robustness-library style net: forward(x, with_latent=False) returning features too."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 10)

    def forward(self, x, with_latent=False, mask=None):
        latent = torch.flatten(self.features(x), 1)
        if mask is not None:
            latent = latent * mask
        out = self.fc(latent)
        if with_latent:
            return out, latent
        return out


class FlatInputCNN(nn.Module):
    """VNN-COMP / auto_LiRPA: a flat 64-vector reshaped to an image by view(x.size(0), 1, 8, 8)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = x.view(x.size(0), 1, 8, 8)
        x = F.relu(self.conv(x))
        return self.fc(x.view(x.size(0), -1))


# --- CIFAR ResNets (kuangliu pytorch-cifar, auto_LiRPA resnet, CROWN-IBP ResNet) ----------


class BasicBlock(nn.Module):
    """kuangliu BasicBlock: `out += self.shortcut(x)` then F.relu."""

    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class PreActBlock(nn.Module):
    """kuangliu PreActBlock: pre-activation, `out += shortcut`."""

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False))

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, "shortcut") else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class CifarResNet(nn.Module):
    """kuangliu ResNet: stem, stages of blocks, F.avg_pool2d, then a flatten (as given)."""

    def __init__(self, block=BasicBlock, num_blocks=(1, 1), width=4, flatten="flatten"):
        super().__init__()
        self.flatten = flatten
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], 1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], 2)
        self.linear = nn.Linear(2 * width, 10)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer2(self.layer1(out))
        out = F.avg_pool2d(out, 4)
        if self.flatten == "view":
            out = out.view(out.size(0), -1)
        else:
            out = torch.flatten(out, 1)
        return self.linear(out)


class CifarResNetAddInplace(nn.Module):
    """A CIFAR ResNet block written with `out = out.add_(shortcut)` and `out.relu_()`."""

    def __init__(self, width=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.conv3 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width * 4 * 4, 10)

    def forward(self, x):
        shortcut = self.conv1(x).relu_()
        out = self.conv3(F.relu(self.conv2(shortcut)))
        out = out.add_(shortcut)
        out = F.max_pool2d(out.relu_(), 2)
        return self.fc(out.view(out.size(0), -1))


class CifarResNetLostAdd(nn.Module):
    """`out.add_(shortcut)` whose result is dropped, then `F.relu(out)`: FX's `relu` reads
    the pre-add value's node after the in-place add, so the add must not become
    out-of-place (it would vanish)."""

    def __init__(self, width=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width * 8 * 8, 10)

    def forward(self, x):
        shortcut = F.relu(self.conv1(x))
        out = self.conv2(shortcut)
        out.add_(shortcut)
        out = F.relu(out)
        return self.fc(torch.flatten(out, 1))


# --- torchvision-style classifiers (nn.ReLU(inplace=True)) --------------------------------


def conv3x3(in_planes, out_planes, stride=1, groups=1):
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, groups=groups,
                     bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class TVBasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock: one shared ReLU(inplace=True), `out += identity`."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class TVBottleneck(nn.Module):
    """torchvision.models.resnet.Bottleneck (expansion 4)."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TVResNet(nn.Module):
    """torchvision.models.resnet.ResNet: 7x7 stem, max pool, stages, adaptive pool, flatten."""

    def __init__(self, block=TVBasicBlock, layers=(1, 1), width=4, num_classes=10):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, 2 * width, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2 * width * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


class TVVGG(nn.Module):
    """torchvision.models.vgg.VGG with make_layers(cfg, batch_norm)."""

    def __init__(self, cfg=(4, "M", 8, "M"), batch_norm=True, num_classes=10):
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for v in cfg:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
                if batch_norm:
                    layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                else:
                    layers += [conv2d, nn.ReLU(inplace=True)]
                in_channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(in_channels * 2 * 2, 16), nn.ReLU(True), nn.Dropout(p=0.5),
            nn.Linear(16, 16), nn.ReLU(True), nn.Dropout(p=0.5),
            nn.Linear(16, num_classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        x = torch.flatten(x, 1)
        return self.classifier(x)


class KuangliuVGG(nn.Module):
    """kuangliu pytorch-cifar VGG: inplace ReLUs, AvgPool2d(1, 1), out.view(out.size(0), -1)."""

    def __init__(self, cfg=(4, "M", 8, "M")):
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for x in cfg:
            if x == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, x, kernel_size=3, padding=1),
                           nn.BatchNorm2d(x), nn.ReLU(inplace=True)]
                in_channels = x
        layers += [nn.AvgPool2d(kernel_size=1, stride=1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(in_channels * 2 * 2, 10)

    def forward(self, x):
        out = self.features(x)
        out = out.view(out.size(0), -1)
        return self.classifier(out)


class Fire(nn.Module):
    """torchvision.models.squeezenet.Fire."""

    def __init__(self, inplanes, squeeze_planes, expand1x1_planes, expand3x3_planes):
        super().__init__()
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat([self.expand1x1_activation(self.expand1x1(x)),
                          self.expand3x3_activation(self.expand3x3(x))], 1)


class TVSqueezeNet(nn.Module):
    """torchvision.models.squeezenet.SqueezeNet 1.1, narrowed."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, stride=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(8, 2, 4, 4), Fire(8, 2, 4, 4),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(8, 4, 8, 8))
        final_conv = nn.Conv2d(16, num_classes, kernel_size=1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5), final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        x = self.classifier(self.features(x))
        return torch.flatten(x, 1)


class ConvNormActivation(nn.Sequential):
    """torchvision.ops.misc.Conv2dNormActivation (BatchNorm2d, ReLU(inplace=True))."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, groups=1,
                 activation_layer=nn.ReLU):
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride,
                            (kernel_size - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(out_channels)]
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.misc.SqueezeExcitation: sigmoid gate times the input."""

    def __init__(self, input_channels, squeeze_channels):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Sigmoid()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(scale) * x


class ResBottleneckBlock(nn.Module):
    """torchvision.models.regnet.ResBottleneckBlock: `x = self.proj(x) + self.f(x)`."""

    def __init__(self, width_in, width_out, stride, group_width=2, se_ratio=None):
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = ConvNormActivation(width_in, width_out, 1, stride,
                                           activation_layer=None)
        groups = width_out // group_width
        layers = OrderedDict()
        layers["a"] = ConvNormActivation(width_in, width_out, 1)
        layers["b"] = ConvNormActivation(width_out, width_out, 3, stride, groups=groups)
        if se_ratio:
            layers["se"] = SqueezeExcitation(width_out, max(1, int(round(se_ratio * width_in))))
        layers["c"] = ConvNormActivation(width_out, width_out, 1, activation_layer=None)
        self.f = nn.Sequential(layers)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x):
        if self.proj is not None:
            x = self.proj(x) + self.f(x)
        else:
            x = x + self.f(x)
        return self.activation(x)


class TVRegNet(nn.Module):
    """torchvision.models.regnet.RegNet: stem, trunk of ResBottleneckBlocks, head."""

    def __init__(self, widths=(4, 8), se_ratio=None, num_classes=10):
        super().__init__()
        self.stem = ConvNormActivation(3, 4, 3, stride=2)
        blocks = OrderedDict()
        width_in = 4
        for i, width in enumerate(widths):
            blocks[f"block{i + 1}"] = nn.Sequential(
                ResBottleneckBlock(width_in, width, 2, se_ratio=se_ratio),
                ResBottleneckBlock(width, width, 1, se_ratio=se_ratio))
            width_in = width
        self.trunk_output = nn.Sequential(blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width_in, num_classes)

    def forward(self, x):
        x = self.trunk_output(self.stem(x))
        x = self.avgpool(x)
        x = x.flatten(start_dim=1)
        return self.fc(x)


class InvertedResidual(nn.Module):
    """torchvision.models.mobilenetv2.InvertedResidual with ReLU6(inplace=True)."""

    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        self.conv = nn.Sequential(
            ConvNormActivation(inp, hidden, 1, activation_layer=nn.ReLU6),
            ConvNormActivation(hidden, hidden, 3, stride, groups=hidden,
                               activation_layer=nn.ReLU6),
            nn.Conv2d(hidden, oup, 1, bias=False), nn.BatchNorm2d(oup))

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class TVMobileNetV2(nn.Module):
    """torchvision.models.mobilenetv2.MobileNetV2, narrowed: ReLU6 throughout."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            ConvNormActivation(3, 4, 3, stride=2, activation_layer=nn.ReLU6),
            InvertedResidual(4, 4, 1, 2), InvertedResidual(4, 8, 2, 2))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(8, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


# --- DenseNet / GoogLeNet (F.relu(..., inplace=True)) --------------------------------------


class DenseLayer(nn.Module):
    """torchvision.models.densenet._DenseLayer: BN-ReLU(inplace)-conv1x1-BN-ReLU-conv3x3."""

    def __init__(self, num_input_features, growth_rate, bn_size):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, 3, padding=1, bias=False)

    def forward(self, init_features):
        concated = torch.cat(init_features, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concated)))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class DenseBlock(nn.ModuleDict):
    """torchvision.models.densenet._DenseBlock: each layer sees the list of all features."""

    def __init__(self, num_layers, num_input_features, bn_size, growth_rate):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}",
                            DenseLayer(num_input_features + i * growth_rate, growth_rate,
                                       bn_size))

    def forward(self, init_features):
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class TVDenseNet(nn.Module):
    """torchvision.models.densenet.DenseNet, narrowed; its forward ends with
    F.relu(features, inplace=True)."""

    def __init__(self, growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, 3, stride=1, padding=1, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}",
                                     DenseBlock(num_layers, num_features, bn_size, growth_rate))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", nn.Sequential(OrderedDict([
                    ("norm", nn.BatchNorm2d(num_features)), ("relu", nn.ReLU(inplace=True)),
                    ("conv", nn.Conv2d(num_features, num_features // 2, 1, bias=False)),
                    ("pool", nn.AvgPool2d(kernel_size=2, stride=2))])))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, 10)

    def forward(self, x):
        features = self.features(x)
        out = F.relu(features, inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.classifier(out)


class KuangliuDenseNet(nn.Module):
    """kuangliu pytorch-cifar DenseNet Bottleneck: out-of-place F.relu, torch.cat([out, x]),
    then view(out.size(0), -1)."""

    def __init__(self, growth_rate=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 2 * growth_rate, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(2 * growth_rate)
        self.conv2 = nn.Conv2d(2 * growth_rate, growth_rate, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(3 * growth_rate)
        self.linear = nn.Linear(3 * growth_rate, 10)

    def forward(self, x):
        x = self.conv1(x)
        out = self.conv2(F.relu(self.bn1(x)))
        out = torch.cat([out, x], 1)
        out = F.avg_pool2d(F.relu(self.bn(out)), 8)
        out = out.view(out.size(0), -1)
        return self.linear(out)


class BasicConv2d(nn.Module):
    """torchvision.models.googlenet.BasicConv2d: conv, BN, F.relu(x, inplace=True)."""

    def __init__(self, in_channels, out_channels, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        return F.relu(x, inplace=True)


class Inception(nn.Module):
    """torchvision.models.googlenet.Inception: four branches concatenated."""

    def __init__(self, in_channels, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj):
        super().__init__()
        self.branch1 = BasicConv2d(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(BasicConv2d(in_channels, ch3x3red, kernel_size=1),
                                     BasicConv2d(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(in_channels, ch5x5red, kernel_size=1),
                                     BasicConv2d(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
            BasicConv2d(in_channels, pool_proj, kernel_size=1))

    def forward(self, x):
        outputs = [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]
        return torch.cat(outputs, 1)


class TVGoogLeNet(nn.Module):
    """torchvision.models.googlenet.GoogLeNet, narrowed (no aux heads, no transform_input)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = BasicConv2d(3, 8, kernel_size=3, stride=2, padding=1)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = Inception(8, 2, 2, 4, 2, 2, 2)
        self.inception3b = Inception(10, 4, 2, 4, 2, 2, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(12, num_classes)

    def forward(self, x):
        x = self.maxpool1(self.conv1(x))
        x = self.inception3b(self.inception3a(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


# --- TRADES -------------------------------------------------------------------------------


class TRADESSmallCNN(nn.Module):
    """TRADES models/small_cnn.py: one `activ = nn.ReLU(True)` registered under six names."""

    def __init__(self, drop=0.5):
        super().__init__()
        activ = nn.ReLU(True)
        self.feature_extractor = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 4, 3)), ("relu1", activ),
            ("conv2", nn.Conv2d(4, 4, 3)), ("relu2", activ),
            ("maxpool1", nn.MaxPool2d(2, 2)),
            ("conv3", nn.Conv2d(4, 8, 3)), ("relu3", activ),
            ("conv4", nn.Conv2d(8, 8, 3)), ("relu4", activ),
            ("maxpool2", nn.MaxPool2d(2, 2))]))
        self.classifier = nn.Sequential(OrderedDict([
            ("fc1", nn.Linear(8 * 2 * 2, 16)), ("relu1", activ), ("drop", nn.Dropout(drop)),
            ("fc2", nn.Linear(16, 16)), ("relu2", activ),
            ("fc3", nn.Linear(16, 10))]))

    def forward(self, input):
        features = self.feature_extractor(input)
        return self.classifier(features.view(-1, 8 * 2 * 2))


# --- models that stay refused with rewrite=True ---------------------------------------------


class ReadAfterInplace(nn.Module):
    """A pre-activation skip: ReLU(inplace=True) overwrites `h`, which the skip reads later."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(8, 8)
        self.skip = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc1(x)
        a = self.relu(h)
        return self.fc2(a) + self.skip(h)


class NormalizeInputInplace(nn.Module):
    """Normalises its input in place, `x.sub_(mean).div_(std)`, then a small MLP."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.full((1, 8), 0.25))
        self.register_buffer("std", torch.full((1, 8), 0.5))
        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        x.sub_(self.mean).div_(self.std)
        return self.net(x)


class InputReluInplace(nn.Module):
    """A Sequential whose first layer is ReLU(inplace=True): it overwrites the graph input."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(6, 6), nn.ReLU(),
                                 nn.Linear(6, 2))

    def forward(self, x):
        return self.net(x)


class AugmentedNormalize(nn.Module):
    """`x -= mean; x /= std` on the input: FX has no augmented form, so it traces the
    out-of-place subtraction and division (eager PyTorch still overwrites the caller's x)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.full((1, 8), 0.25))
        self.register_buffer("std", torch.full((1, 8), 0.5))
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x -= self.mean
        x /= self.std
        return self.fc(x)


class SizeTimesTwo(nn.Module):
    """A size used arithmetically: x.view(x.size(0) * 2, -1) (two half-samples per sample)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x.view(x.size(0) * 2, -1))


class ViewTwoUnknowns(nn.Module):
    """x.view(x.size(0), -1, 4): a further -1 after the leading slot is not rewritten."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = self.conv(x)
        return self.fc(y.view(y.size(0), -1, 4)).mean(1)


class GlobalPoolByView(nn.Module):
    """b, c = x.size(0), x.size(1); x.view(b, c, -1).mean(2): sizes beyond the batch slot."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        y = F.relu(self.conv(x))
        b, c = y.size(0), y.size(1)
        return self.fc(y.view(b, c, -1).mean(2))


def lirpa_sigmoid_mlp(in_dim=8):
    """auto_LiRPA examples: an MLP with nn.Sigmoid activations (not piecewise-linear)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_dim * in_dim, 16), nn.Sigmoid(),
                         nn.Linear(16, 10))


def eran_tanh_mlp(in_dim=8):
    """ERAN ffnnTANH: Tanh activations (not piecewise-linear)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_dim * in_dim, 16), nn.Tanh(),
                         nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 10))


def crown_ibp_hardtanh(in_dim=8):
    """A CROWN-IBP / convex_adversarial ablation with nn.Hardtanh and Flatten()."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 4, stride=2, padding=1), nn.Hardtanh(),
        Flatten(),
        nn.Linear(4 * (in_dim // 2) ** 2, 10))


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model and its expected outcomes.

    Attributes:
        name: The test id.
        style: The community or code base whose style it imitates.
        factory: Builds the model (seeded, in evaluation mode).
        shapes: One per-sample input shape per given input.
        as_written: CONVERTS, or the reason codes `diagnose` reports today, deduplicated in
            order of first appearance.
        with_rewrite: The same, expected with `rewrite=True` (issue 18's rules).
    """

    name: str
    style: str
    factory: Callable[[], nn.Module]
    shapes: tuple[tuple[int, ...], ...]
    as_written: Outcome
    with_rewrite: Outcome


def _entry(name, style, build, seed, shapes, as_written, with_rewrite, **kwargs) -> ZooEntry:
    factory = functools.partial(seeded, build, seed, **kwargs)
    return ZooEntry(name, style, factory, shapes, as_written, with_rewrite)


SIZE_FLATTEN = ("unsupported-method", "dynamic-argument")
"""`x.view(x.size(0), -1)`: `size` is not a spelling, and the view's size is traced."""

SIZE_INDEX_FLATTEN = ("unsupported-method", "getitem-non-tensor", "dynamic-argument")
"""`x.view((x.size()[0], -1))`: `size`, then indexing its result, then the view."""

SHAPE_INDEX_FLATTEN = ("unsupported-function", "getitem-non-tensor", "dynamic-argument")
"""`x.reshape(x.shape[0], -1)`: `getattr(x, "shape")`, then indexing it, then the reshape."""

INPLACE = ("inplace",)
INPUT_COUNT = ("input-count",)
TRACE_FAILED = ("trace-failed",)
"""A defaulted flag made into a traced input, then used in an `if`."""
UNSUPPORTED_MODULE = ("unsupported-module",)
TENSOR_PRODUCT = ("affine-tensor-tensor",)

ZOO: tuple[ZooEntry, ...] = (
    # converts as written
    _entry("lirpa_mlp_3layer", "auto_LiRPA examples (nn.Flatten MLP)", lirpa_mlp_3layer, 1,
           ((1, 8, 8),), CONVERTS, CONVERTS),
    _entry("lirpa_cnn_4layer", "auto_LiRPA examples (cnn_4layer)", lirpa_cnn_4layer, 2,
           ((3, 8, 8),), CONVERTS, CONVERTS),
    _entry("lirpa_cnn_7layer_bn", "auto_LiRPA examples (cnn_7layer with BatchNorm)",
           lirpa_cnn_7layer_bn, 3, ((3, 8, 8),), CONVERTS, CONVERTS),
    _entry("vnncomp_mnist_fc", "VNN-COMP mnistfc", vnncomp_mnist_fc, 4, ((1, 8, 8),),
           CONVERTS, CONVERTS),
    _entry("vnncomp_oval21_base", "VNN-COMP'21 oval21 (normalisation layer)",
           vnncomp_oval21_base, 5, ((3, 8, 8),), CONVERTS, CONVERTS),
    _entry("eran_leaky_cnn", "ERAN / VNN-COMP (LeakyReLU, pooling)", eran_leaky_cnn, 6,
           ((1, 8, 8),), CONVERTS, CONVERTS),
    _entry("cifar_resnet_iadd", "kuangliu pytorch-cifar ResNet (out += shortcut)",
           CifarResNet, 7, ((3, 8, 8),), CONVERTS, CONVERTS),
    _entry("cifar_preact_resnet", "kuangliu pytorch-cifar PreActResNet", CifarResNet, 8,
           ((3, 8, 8),), CONVERTS, CONVERTS, block=PreActBlock),
    # converts with rewrite=True: size-dependent flattens
    _entry("convex_adversarial_mnist", "convex_adversarial (user Flatten, view(x.size(0), -1))",
           convex_adversarial_mnist, 9, ((1, 8, 8),), SIZE_FLATTEN, CONVERTS),
    _entry("crown_ibp_cnn_2layer", "CROWN-IBP model_defs (model_cnn_2layer)",
           crown_ibp_cnn_2layer, 10, ((3, 8, 8),), SIZE_FLATTEN, CONVERTS),
    _entry("crown_ibp_dm_small", "CROWN-IBP model_defs (IBP_small)", crown_ibp_dm_small, 11,
           ((1, 8, 8),), SIZE_FLATTEN, CONVERTS),
    _entry("abcrown_cnn_4layer_size_index",
           "alpha-beta-CROWN model_defs (view((x.size()[0], -1)))",
           abcrown_cnn_4layer_size_index, 12, ((3, 8, 8),), SIZE_INDEX_FLATTEN, CONVERTS),
    _entry("abcrown_mlp_shape", "alpha-beta-CROWN model_defs (reshape(x.shape[0], -1))",
           abcrown_mlp_shape, 13, ((1, 8, 8),), SHAPE_INDEX_FLATTEN, CONVERTS),
    _entry("vnncomp_flat_input_cnn", "VNN-COMP / auto_LiRPA (view(x.size(0), 1, 8, 8))",
           FlatInputCNN, 14, ((64,),), SIZE_FLATTEN, CONVERTS),
    _entry("cifar_resnet_view", "kuangliu pytorch-cifar ResNet (out.view(out.size(0), -1))",
           CifarResNet, 15, ((3, 8, 8),), SIZE_FLATTEN, CONVERTS, flatten="view"),
    _entry("kuangliu_densenet", "kuangliu pytorch-cifar DenseNet (torch.cat, view)",
           KuangliuDenseNet, 16, ((3, 8, 8),), SIZE_FLATTEN, CONVERTS),
    # converts with rewrite=True: in-place forms nothing observes
    _entry("tv_resnet_basic", "torchvision ResNet-18 (ReLU(inplace=True), out += identity)",
           TVResNet, 17, ((3, 16, 16),), INPLACE, CONVERTS),
    _entry("tv_resnet_bottleneck", "torchvision ResNet-50 (Bottleneck)", TVResNet, 18,
           ((3, 16, 16),), INPLACE, CONVERTS, block=TVBottleneck, layers=(1, 1), width=2),
    _entry("tv_vgg_bn", "torchvision VGG-BN (make_layers, ReLU(True), Dropout)", TVVGG, 19,
           ((3, 8, 8),), INPLACE, CONVERTS),
    _entry("tv_vgg", "torchvision VGG without BatchNorm", TVVGG, 20, ((3, 8, 8),), INPLACE,
           CONVERTS, batch_norm=False),
    _entry("tv_squeezenet", "torchvision SqueezeNet 1.1 (Fire, ceil_mode pools)",
           TVSqueezeNet, 21, ((3, 17, 17),), INPLACE, CONVERTS),
    _entry("tv_regnet_x", "torchvision RegNetX (ResBottleneckBlock, grouped conv)", TVRegNet,
           22, ((3, 16, 16),), INPLACE, CONVERTS),
    _entry("tv_densenet", "torchvision DenseNet (F.relu(features, inplace=True))", TVDenseNet,
           23, ((3, 8, 8),), INPLACE, CONVERTS),
    _entry("tv_googlenet", "torchvision GoogLeNet (BasicConv2d F.relu(x, inplace=True))",
           TVGoogLeNet, 24, ((3, 16, 16),), INPLACE, CONVERTS),
    _entry("trades_small_cnn", "TRADES small_cnn (one shared nn.ReLU(True))", TRADESSmallCNN,
           25, ((1, 20, 20),), INPLACE, CONVERTS),
    _entry("kuangliu_vgg", "kuangliu pytorch-cifar VGG (ReLU(inplace=True), view)",
           KuangliuVGG, 26, ((3, 8, 8),), INPLACE + SIZE_FLATTEN, CONVERTS),
    _entry("cifar_resnet_add_", "CIFAR ResNet with out = out.add_(shortcut), relu_()",
           CifarResNetAddInplace, 27, ((3, 8, 8),), INPLACE + SIZE_FLATTEN, CONVERTS),
    # converts once defaulted forward arguments are bound
    _entry("colt_convmed", "COLT networks (forward(x, init_lambda=False, skip_norm=False))",
           COLTConvNet, 28, ((1, 8, 8),), CONVERTS, CONVERTS),
    _entry("colt_ffnn", "COLT networks (FFNN, forward(x, init_lambda=False))", COLTFC, 29,
           ((1, 8, 8),), CONVERTS, CONVERTS),
    _entry("robustness_with_latent", "robustness library (forward(x, with_latent=False, "
           "mask=None))", FeatureNet, 30, ((3, 8, 8),), CONVERTS, CONVERTS),
    # stays refused with rewrite=True
    _entry("read_after_inplace", "pre-activation skip reading a tensor ReLU(inplace) "
           "overwrote", ReadAfterInplace, 31, ((8,),), INPLACE, INPLACE),
    _entry("cifar_resnet_lost_add", "CIFAR block with a dropped out.add_(shortcut) result",
           CifarResNetLostAdd, 32, ((3, 8, 8),), INPLACE, INPLACE),
    _entry("normalize_input_inplace", "input normalisation x.sub_(mean).div_(std)",
           NormalizeInputInplace, 33, ((8,),), INPLACE, INPLACE),
    _entry("input_relu_inplace", "Sequential starting with ReLU(inplace=True) on the input",
           InputReluInplace, 34, ((6,),), INPLACE, INPLACE),
    _entry("size_times_two", "a size used arithmetically (view(x.size(0) * 2, -1))",
           SizeTimesTwo, 35, ((16,),), SIZE_FLATTEN, SIZE_FLATTEN),
    _entry("view_two_unknowns", "view(y.size(0), -1, 4): a second -1", ViewTwoUnknowns, 36,
           ((1, 4, 4),), SIZE_FLATTEN, SIZE_FLATTEN),
    _entry("global_pool_by_view", "b, c = y.size(0), y.size(1); y.view(b, c, -1).mean(2)",
           GlobalPoolByView, 37, ((3, 4, 4),), SIZE_FLATTEN, SIZE_FLATTEN),
    _entry("lirpa_sigmoid_mlp", "auto_LiRPA examples (nn.Sigmoid MLP)", lirpa_sigmoid_mlp, 38,
           ((1, 8, 8),), UNSUPPORTED_MODULE, UNSUPPORTED_MODULE),
    _entry("eran_tanh_mlp", "ERAN ffnnTANH", eran_tanh_mlp, 39, ((1, 8, 8),),
           UNSUPPORTED_MODULE, UNSUPPORTED_MODULE),
    _entry("crown_ibp_hardtanh", "CROWN-IBP (nn.Hardtanh, user Flatten)", crown_ibp_hardtanh,
           40, ((1, 8, 8),), UNSUPPORTED_MODULE + SIZE_FLATTEN, UNSUPPORTED_MODULE),
    _entry("tv_mobilenet_v2", "torchvision MobileNetV2 (ReLU6(inplace=True))", TVMobileNetV2,
           41, ((3, 8, 8),), UNSUPPORTED_MODULE, UNSUPPORTED_MODULE),
    _entry("tv_regnet_y", "torchvision RegNetY (SqueezeExcitation: Sigmoid, gate * x)",
           TVRegNet, 42, ((3, 16, 16),), INPLACE + UNSUPPORTED_MODULE + TENSOR_PRODUCT,
           UNSUPPORTED_MODULE + TENSOR_PRODUCT, se_ratio=0.25),
    _entry("augmented_normalize", "x -= mean; x /= std on the input (traced out of place)",
           AugmentedNormalize, 43, ((8,),), CONVERTS, CONVERTS),
)
"""The zoo, one entry per model."""
