"""Bundled example models: three that convert, and several rejected for different reasons."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def _seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """Build with seeded initialisation, leaving the caller's global RNG state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build()
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d) and module.running_mean is not None:
                module.running_mean.normal_(0.0, 0.2)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.data.uniform_(0.5, 1.5)
                module.bias.data.normal_(0.0, 0.1)
    return model.eval()


class MLP(nn.Module):
    """A three-layer perceptron on 16 features."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32),
                                    nn.LeakyReLU(0.1), nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.layers(x)


class LeNet(nn.Module):
    """A LeNet-style CNN on 1x28x28 images, in functional spellings."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(-1, 16 * 5 * 5)
        x = self.fc2(F.relu(self.fc1(x))).relu()
        return self.fc3(x)


class ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus a skip connection (a 1x1 conv when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.skip(x))


class ResidualCNN(nn.Module):
    """A small residual CNN on 3x32x32 images with BatchNorm, pooling, concat and scaling."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.block1 = ResidualBlock(8, 8)
        self.block2 = ResidualBlock(8, 16, stride=2)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1))
        self.fc = nn.Linear(32, classes)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        x = (x - 0.5) / 0.25
        x = self.block2(self.block1(self.stem(x)))
        wide = torch.cat([self.pool(x), F.avg_pool2d(x, 2)], dim=1)
        return self.fc(self.head(wide) * self.scale)


class SigmoidMLP(nn.Module):
    """Rejected: a sigmoid is not in the spelling tables."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


class BatchMixing(nn.Module):
    """Rejected: view(-1) merges the batch axis into the features."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        return self.fc(x.flatten(1)).view(-1)


class DataDependent(nn.Module):
    """Rejected: Python control flow on a tensor value cannot be traced."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


class ManyProblems(nn.Module):
    """Rejected for several reasons at once, to show that diagnose lists every one."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout()
        self.fc = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        y = self.drop(self.bn(self.conv(x)))
        y = y.relu_() * y
        y = y.view(y.size(0), -1)
        return self.fc(torch.tanh(y))


@dataclass(frozen=True)
class Example:
    """A bundled model: how to build it, its per-sample input shapes, and what NCET says."""

    name: str
    build: Callable[[], nn.Module]
    input_shapes: tuple[tuple[int, ...], ...]
    converts: bool
    description: str


def _training(build: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return lambda: build().train()


EXAMPLES: dict[str, Example] = {e.name: e for e in (
    Example("mlp", lambda: _seeded(MLP, 0), ((16,),), True, MLP.__doc__),
    Example("lenet", lambda: _seeded(LeNet, 1), ((1, 28, 28),), True, LeNet.__doc__),
    Example("residual_cnn", lambda: _seeded(ResidualCNN, 2), ((3, 32, 32),), True,
            ResidualCNN.__doc__),
    Example("sigmoid_mlp", lambda: _seeded(SigmoidMLP, 3), ((8,),), False, SigmoidMLP.__doc__),
    Example("training_mode_cnn", _training(lambda: _seeded(ResidualCNN, 2)), ((3, 32, 32),),
            False, "Rejected: the residual CNN left in training mode (BatchNorm and dropout)."),
    Example("batch_mixing", lambda: _seeded(BatchMixing, 4), ((3, 4),), False,
            BatchMixing.__doc__),
    Example("data_dependent", lambda: _seeded(DataDependent, 5), ((4,),), False,
            DataDependent.__doc__),
    Example("many_problems", _training(lambda: _seeded(ManyProblems, 6)), ((3, 8, 8),), False,
            ManyProblems.__doc__),
)}
"""Every bundled example by name."""


def load_example(name: str) -> tuple[nn.Module, tuple[tuple[int, ...], ...]]:
    """Build the bundled example `name`; returns the model and its per-sample input shapes.

    Raises:
        KeyError: No example has that name (the message lists them).
    """
    if name not in EXAMPLES:
        raise KeyError(f"no example {name!r}; choose one of {', '.join(EXAMPLES)}")
    example = EXAMPLES[name]
    return example.build(), example.input_shapes
