"""The package layout (docs/architecture.md): the public API is DESIGN section 2's, each
subpackage names a small public face, and the architecture page lists every module there is."""

import importlib
import pathlib
import re

import pytest

import ncet

ROOT = pathlib.Path(ncet.__file__).parent
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"

# DESIGN section 2: the names code outside this repository calls.
PUBLIC_API = {
    "convert", "diagnose", "evaluate", "check_exactness", "save", "load",
    "GraphIR", "IRNode", "Source", "ConversionReport", "Row", "ExactnessReport",
    "ExactnessEntry", "NCETError", "ConversionError", "TraceError",
    "UnsupportedOperatorError", "SupportBoundaryError", "GraphIRFormatError", "to_onnx",
    "check_onnx", "lint_onnx", "compare", "Comparison", "from_onnx", "diagnose_onnx",
    "ONNXImportError", "read_vnnlib", "write_vnnlib", "Property", "VNNLIBError",
    "adjudicate", "Adjudication", "WitnessError", "read_witness", "float_margin", "Margin",
    "tighten", "simplify", "run_suite",
}

SUBPACKAGES = ("ncet.frontend", "ncet.exactness", "ncet.format", "ncet.render", "ncet.onnx",
               "ncet.properties", "ncet.regions", "ncet.passes",
               "ncet.suites")


def test_the_public_api_is_designs():
    assert set(ncet.__all__) == PUBLIC_API
    for name in ncet.__all__:
        assert getattr(ncet, name) is not None


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_names_its_public_face(package):
    module = importlib.import_module(package)
    assert module.__doc__, f"{package} has no docstring saying what it is for"
    assert module.__all__, f"{package} names no public face"
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names {name!r}, which it lacks"


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_the_top_level_api_comes_from_the_subpackages_faces(package):
    """What ncet re-exports from a stage is part of that stage's face, not an internal."""
    module = importlib.import_module(package)
    for name in ncet.__all__:
        value = getattr(ncet, name)
        if getattr(value, "__module__", "").startswith(package + "."):
            assert name in module.__all__, f"ncet.{name} comes from {package} internals"


def _modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py") and "cli" not in p.parts}


def test_the_architecture_page_lists_every_module():
    text = ARCHITECTURE.read_text()
    listed = set(re.findall(r"`((?:[a-z0-9_]+/)*[a-z0-9_]+\.py)`", text))
    missing = sorted(m for m in _modules() if m not in listed)
    assert not missing, f"docs/architecture.md does not list {missing}"
    packages = {p.split(".")[1] for p in SUBPACKAGES}
    gone = sorted(m for m in listed if m.split("/")[0] in packages and not (ROOT / m).exists())
    assert not gone, f"docs/architecture.md lists modules that do not exist: {gone}"
