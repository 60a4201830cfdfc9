"""Benchmark check_exactness on three standard CNNs, defined in plain torch exactly as
torchvision defines them (torchvision itself is not a dependency of NCET):

  * ResNet-18, CIFAR variant: torchvision's ResNet with BasicBlock and layers [2, 2, 2, 2],
    its 7x7 stride-2 stem convolution replaced by a 3x3 stride-1 one and its max pooling by
    nn.Identity (the usual CIFAR adaptation), 10 classes, on 3x32x32 inputs;
  * VGG-11-BN at 32x32: torchvision's make_layers(cfgs["A"], batch_norm=True) verbatim; the
    head is adapted as the CIFAR variants do: at 32x32 the features end in a 1x1 map, which
    torchvision's AdaptiveAvgPool2d((7, 7)) would upsample to 7x7 for a
    Linear(512 * 7 * 7, 4096) - ReLU - Dropout - Linear(4096, 4096) - ReLU - Dropout -
    Linear(4096, 1000) classifier; here AdaptiveAvgPool2d((1, 1)) and one Linear(512, 10)
    (as in kuangliu/pytorch-cifar), 10 classes;
  * ResNet-50: torchvision's ResNet with Bottleneck (v1.5: the stride on the 3x3 conv) and
    layers [3, 4, 6, 3], the standard ImageNet stem (7x7 stride-2 conv, 3x3 stride-2 max
    pooling), 10 classes, on 3x64x64 inputs.

One change everywhere: torchvision's nn.ReLU(inplace=True) is nn.ReLU() here, because NCET
rejects in-place operations (an in-place ReLU overwrites the value its input node holds).
The blocks' `out += identity` is kept as torchvision writes it: FX traces it as an
out-of-place add. Weights are initialised as torchvision does (Kaiming-normal convolutions,
BatchNorm weight 1 and bias 0, VGG's Linear N(0, 0.01)), seeded; the BatchNorm running
statistics are made non-trivial (mean ~ N(0, 0.1), var ~ U(0.5, 1.5)) and the models are put
in eval mode.

For each model, on --samples seeded float32 torch.randn inputs, with torch's default number
of threads, it measures: convert (once); check_exactness against its floor (one float32
forward of the model under no_grad + one float64 ncet.evaluate of the same inputs), as
medians of --repeats interleaved (check, floor) pairs and the median of their paired ratios
(as benchmarks/exactness.py's `paired` does), the target being <= 3; and the share of the
check spent in the arithmetic probes (ncet.exactness.arithmetic.read_arithmetic_model, which
check_exactness calls once): the median of 7 standalone calls after each timed pair, under
the same load as the check (the JSON also has the median time of the call the timed checks
make themselves), the target being well under 5%.

Before timing, each model must convert and its check must be ok on the first
--warmup-samples inputs; that check and one floor on the same inputs are the warm-up (a
full-size warm-up would add about a minute: at 256 samples one check of ResNet-18 or
ResNet-50 takes about 30 s on 2 cores, and the whole run about 6 minutes). Every timed
check must be ok as well; a model whose check is not prints the verdict's first line and
the script exits 1. Times are wall seconds (the JSON also has the CPU seconds of the
process, summed over its threads).

Usage: python benchmarks/cnn_check.py [--samples 256] [--repeats 3] [--quick] [--json out.json]
Ratios are measured in one run on this (shared) machine; they are not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import subprocess
import sys
import time

import torch
from torch import nn

import ncet
import ncet.exactness.arithmetic
import ncet.exactness.check

if __package__:  # imported as benchmarks.cnn_check (the tests)
    from .scale import _median, inputs
else:  # run as a script (python benchmarks/cnn_check.py): benchmarks/ itself is on sys.path
    from scale import _median, inputs

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("resnet18_cifar", "vgg11_bn_cifar", "resnet50")
PROBE_CALLS = 7  # read_arithmetic_model calls after each timed pair: their median is the cost


# --- torchvision's ResNet (torchvision/models/resnet.py), ReLU not in place ---------------
def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1,
            dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU()  # torchvision: nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class Bottleneck(nn.Module):
    # the stride for downsampling is on the 3x3 conv (conv2), as in torchvision (ResNet v1.5)
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU()  # torchvision: nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)
        out = self.conv3(out)
        out = self.bn3(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    """torchvision's ResNet; `cifar_stem` swaps the stem for a 3x3 stride-1 conv and drops
    the max pooling (the CIFAR variant)."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None,
                 cifar_stem=False):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element "
                             f"tuple, got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        if cifar_stem:
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1,
                                   bias=False)
        else:
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3,
                                   bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU()  # torchvision: nn.ReLU(inplace=True)
        self.maxpool = (nn.Identity() if cifar_stem
                        else nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2,
                                       dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2,
                                       dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups,
                        self.base_width, previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x

    def forward(self, x):
        return self._forward_impl(x)


# --- torchvision's VGG (torchvision/models/vgg.py), ReLU not in place, CIFAR head -----------
cfgs = {"A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]}


def make_layers(cfg, batch_norm=False) -> nn.Sequential:
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:  # torchvision: nn.ReLU(inplace=True)
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU()]
            else:
                layers += [conv2d, nn.ReLU()]
            in_channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """torchvision's VGG with the CIFAR head: AdaptiveAvgPool2d((1, 1)) (torchvision: (7, 7))
    and a single Linear(512, num_classes) classifier (torchvision: 512 * 7 * 7 -> 4096 ->
    4096 -> num_classes with ReLU and Dropout)."""

    def __init__(self, features: nn.Module, num_classes: int = 10, init_weights: bool = True):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Linear(512, num_classes))
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


def resnet18_cifar(num_classes: int = 10) -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes, cifar_stem=True)


def vgg11_bn_cifar(num_classes: int = 10) -> VGG:
    return VGG(make_layers(cfgs["A"], batch_norm=True), num_classes=num_classes)


def resnet50(num_classes: int = 10) -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)


_FACTORIES = {"resnet18_cifar": (resnet18_cifar, (3, 32, 32)),
              "vgg11_bn_cifar": (vgg11_bn_cifar, (3, 32, 32)),
              "resnet50": (resnet50, (3, 64, 64))}


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[int, ...]]:
    """The seeded eval-mode model and its per-sample input shape; the BatchNorm running
    statistics are drawn (mean ~ N(0, 0.1), var ~ U(0.5, 1.5)), not left at 0 and 1."""
    factory, shape = _FACTORIES[name]
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        model = factory()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval(), shape


# --- the measurements -------------------------------------------------------------------
def _timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds (this process, every thread) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def probe_times(calls: int = PROBE_CALLS) -> list[float]:
    """Wall seconds of `calls` ncet.exactness.arithmetic.read_arithmetic_model() calls."""
    return [_timed(ncet.exactness.arithmetic.read_arithmetic_model)[0] for _ in range(calls)]


@contextlib.contextmanager
def probes_in_check(seconds: list[float]):
    """Time the read_arithmetic_model call check_exactness itself makes (appended to
    `seconds`): the probes' cost where they run, beside the standalone median."""
    original = ncet.exactness.check.read_arithmetic_model

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - t0)

    ncet.exactness.check.read_arithmetic_model = timed
    try:
        yield
    finally:
        ncet.exactness.check.read_arithmetic_model = original


def _first_line(report) -> str:
    return report.summary().splitlines()[0]


def measure(name: str, samples: int, repeats: int, warmup_samples: int = 8) -> dict:
    """One model's row; raises RuntimeError when a check is not ok.

    Before timing, the model is converted and checked on its first `warmup_samples` inputs
    (which also warms up the check and the floor, so no full-size warm-up run is needed:
    at 256 samples a check of ResNet-50 takes about 30 s on 2 cores); then `repeats` interleaved
    (check, floor) pairs on all `samples`, each timed check's verdict required ok too.
    Like benchmarks/exactness.py's `paired`, the ratio is the median of paired ratios.
    """
    model, shape = build(name)
    start = time.perf_counter()
    ir = ncet.convert(model, shape)
    convert_s = time.perf_counter() - start
    x = inputs(shape, samples)
    warm = x[:max(1, min(warmup_samples, samples))]

    def floor(x=x):
        with torch.no_grad():
            model(x)
        ncet.evaluate(ir, x)

    reports = []

    def check(x=x):
        reports.append(ncet.check_exactness(model, ir, x))

    check(warm)
    floor(warm)
    if not reports[-1].ok:
        raise RuntimeError(f"{name}: check_exactness is not ok on {warm.shape[0]} samples: "
                           f"{_first_line(reports[-1])}")
    pairs, probes, in_check = [], [], []
    probe_times(1)  # warm-up
    with probes_in_check(in_check):
        for _ in range(repeats):  # the probes between pairs: under the same load as the check
            pairs.append((_timed(check), _timed(floor)))
            probes += probe_times()
    bad = [r for r in reports[1:] if not r.ok]
    if bad:
        raise RuntimeError(f"{name}: check_exactness is not ok on {samples} samples: "
                           f"{_first_line(bad[0])}")
    check_s = _median([c[0] for c, _ in pairs])
    probes_s = _median(probes)
    fx_nodes = len(torch.fx.symbolic_trace(model).graph.nodes)
    return {"model": name, "input": "x".join(map(str, shape)), "fx_nodes": fx_nodes,
            "ir_nodes": len(ir.nodes),
            "parameters": sum(p.numel() for p in model.parameters()), "samples": samples,
            "repeats": repeats, "threads": torch.get_num_threads(), "convert_s": convert_s,
            "floor_s": _median([f[0] for _, f in pairs]), "check_s": check_s,
            "check_over_floor": _median([c[0] / f[0] for c, f in pairs]),
            "floor_cpu_s": _median([f[1] for _, f in pairs]),
            "check_cpu_s": _median([c[1] for c, _ in pairs]),
            "check_over_floor_cpu": _median([c[1] / f[1] for c, f in pairs]),
            "probes_ms": 1e3 * probes_s, "probes_over_check_pct": 100 * probes_s / check_s,
            "probe_calls": len(probes), "probes_min_ms": 1e3 * min(probes),
            "probes_max_ms": 1e3 * max(probes),
            "probes_in_check_ms": 1e3 * _median(in_check),
            "verdict": _first_line(reports[-1])}


def machine() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "unknown"
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpu": cpu, "nproc": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "git_head": head}


COLUMNS = ("model", "FX nodes", "samples", "convert s", "floor s", "check s", "check/floor",
           "probes ms", "probes/check %")


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(
        ":---" if c == "model" else "---:" for c in COLUMNS) + "|"]
    for r in rows:
        cells = (r["model"], f"{r['fx_nodes']}", f"{r['samples']}", f"{r['convert_s']:.2f}",
                 f"{r['floor_s']:.2f}", f"{r['check_s']:.2f}", f"{r['check_over_floor']:.2f}",
                 f"{r['probes_ms']:.1f}", f"{r['probes_over_check_pct']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved (check, floor) pairs, after the warm-up")
    parser.add_argument("--warmup-samples", type=int, default=8,
                        help="samples of the verification and warm-up check (default 8)")
    parser.add_argument("--models", type=lambda s: tuple(s.split(",")), default=MODELS,
                        help=f"comma-separated (default {','.join(MODELS)})")
    parser.add_argument("--quick", action="store_true",
                        help="8 samples, one repeat, a 2-sample warm-up: a smoke test, not a "
                             "measurement")
    parser.add_argument("--json", help="also write the machine and the rows to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.repeats = min(args.samples, 8), 1
        args.warmup_samples = min(args.warmup_samples, 2)
    start = time.perf_counter()
    info = machine()
    rows, failures = [], []
    for name in args.models:
        try:
            rows.append(measure(name, args.samples, args.repeats, args.warmup_samples))
        except RuntimeError as e:
            failures.append(str(e))
            print(e, file=sys.stderr, flush=True)
            continue
        r = rows[-1]
        print(f"{name}: check/floor {r['check_over_floor']:.2f} "
              f"({time.perf_counter() - start:.0f} s so far)", file=sys.stderr, flush=True)
    info["total_s"] = time.perf_counter() - start
    print(f"date {info['date']}; machine {info['cpu']}, nproc {info['nproc']}, "
          f"torch {info['torch']} with {info['torch_threads']} threads; "
          f"git {info['git_head']}\n")
    print(table(rows))
    print("\nfloor = one float32 forward (no_grad) + one float64 ncet.evaluate on the same "
          "samples; check/floor = median of paired ratios over "
          f"{args.repeats} interleaved repeats (target <= 3); probes = median of "
          f"{PROBE_CALLS} read_arithmetic_model() calls after each pair (target: well under 5% "
          "of the check)")
    print(f"total runtime {info['total_s']:.0f} s")
    for failure in failures:
        print(f"NOT OK: {failure}")
    bad = [r for r in rows if not (math.isfinite(r["check_over_floor"]))]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "settings": {"samples": args.samples,
                                                     "repeats": args.repeats,
                                                     "warmup_samples": args.warmup_samples},
                       "rows": rows, "failures": failures}, f, indent=2)
    return 1 if failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
