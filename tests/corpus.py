"""Where the VNN-COMP corpus is (`../shared/vnncomp` beside the repository, never copied into
it), and how tests reach it: in CI (`CI=true`) a missing corpus fails the test; elsewhere the
test is skipped, saying why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CORPUS = (Path(__file__).resolve().parent.parent / ".." / "shared" / "vnncomp").resolve()
"""The corpus folder: `<benchmark>/onnx/*.onnx`, `<benchmark>/vnnlib/*.vnnlib`, `witnesses/`."""


def corpus_root() -> Path:
    """The corpus folder, or a skip (outside CI) or failure (in CI) when it is missing."""
    if (CORPUS / "README.md").is_file():
        return CORPUS
    message = f"the VNN-COMP corpus is not at {CORPUS} (see ../shared/vnncomp/README.md)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + ": CI must have it", pytrace=False)
    pytest.skip(message)


def corpus_networks() -> list[str]:
    """Every corpus network, as its path relative to the corpus folder (sorted); [] when the
    corpus is missing (a test over them then calls `corpus_root()` first to say why)."""
    if not CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.onnx"))


def corpus_properties() -> list[str]:
    """Every corpus property (.vnnlib), relative to the corpus folder (sorted)."""
    if not CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.vnnlib"))


def corpus_instances() -> list[tuple[str, str]]:
    """Every (network, property) pair of the benchmarks' `instances_included.csv`, as paths
    relative to the corpus folder, in file order; [] when the corpus is missing."""
    pairs = []
    for listing in sorted(CORPUS.glob("*/instances_included.csv")) if CORPUS.is_dir() else []:
        for line in listing.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            onnx, vnnlib = line.split(",")[:2]
            bench = listing.parent.relative_to(CORPUS)
            pairs.append((str(bench / onnx), str(bench / vnnlib)))
    return pairs


def first_property(network: str) -> str | None:
    """The first property the competition pairs with `network`, or None."""
    return next((p for n, p in corpus_instances() if n == network), None)


def box_samples(prop, shape: tuple[int, ...], count: int, seed: int = 0):
    """`count` float32 samples of shape (count, *shape) inside the property's first box,
    drawn uniformly between its bounds rounded inward (so each is inside exactly), the first
    two the box's lower and upper corners."""
    import numpy as np
    import torch

    lower, upper = prop.input_boxes_as(np.float32, "inward")[0]
    rng = np.random.default_rng(seed)
    draws = lower + (upper - lower) * rng.random((count, lower.size), dtype=np.float32)
    draws = np.clip(draws, lower, upper).astype(np.float32)
    draws[0], draws[min(1, count - 1)] = lower, upper
    return torch.from_numpy(draws.reshape(count, *shape))
