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
