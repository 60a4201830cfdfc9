"""Binder's files agree with the one constraints file, and an environment built from them works.

Binder (repo2docker) runs `pip install -r binder/requirements.txt` from the repository root on
the Python that binder/runtime.txt names. The fast tests check those files against
constraints.txt, pyproject.toml, this environment and the README's badge template; the slow
one builds a fresh virtual environment from binder/requirements.txt as Binder would and
imports `ncet` and `ncet.widgets` in it (a few minutes; CI runs it too).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import urllib.parse
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "constraints.txt"
REQUIREMENTS = REPO / "binder" / "requirements.txt"
RUNTIME = REPO / "binder" / "runtime.txt"
PYPROJECT = REPO / "pyproject.toml"
README = REPO / "README.md"
QUICKSTART = "notebooks/quickstart.ipynb"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def requirement_lines(path: Path) -> list[str]:
    """The lines of a pip requirements or constraints file, comments and blanks removed."""
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def pins() -> dict[str, Version]:
    """constraints.txt as {canonical name: pinned version}; every line must be `name==X`."""
    pinned = {}
    for line in requirement_lines(CONSTRAINTS):
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"constraints.txt: {line!r} is not an exact pin"
        name = canonicalize_name(requirement.name)
        assert name not in pinned, f"constraints.txt pins {name} twice"
        pinned[name] = Version(specifier.version)
    return pinned


def binder_requirements() -> tuple[dict[str, list[str]], list[Requirement], list[str]]:
    """binder/requirements.txt as (options, named requirements, editable paths)."""
    options: dict[str, list[str]] = {}
    named, editable = [], []
    for line in requirement_lines(REQUIREMENTS):
        if line.startswith("-e "):
            editable.append(line.removeprefix("-e ").strip())
        elif line.startswith("-"):
            option, _, value = line.partition(" ")
            options.setdefault(option, []).append(value.strip())
        else:
            named.append(Requirement(line))
    return options, named, editable


def pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


# --- the files agree -------------------------------------------------------------------------


def test_constraints_pin_what_is_installed_here():
    """The pins are the versions this environment was built with (`make venv` uses them)."""
    for name, version in pins().items():
        installed = Version(metadata.version(name))
        assert installed.public == version.public, f"{name}: pinned {version}, got {installed}"


def test_every_declared_dependency_is_pinned():
    project = pyproject()["project"]
    declared = list(project["dependencies"])
    for extra in ("test", "widgets"):
        declared += project["optional-dependencies"][extra]
    pinned = pins()
    missing = {canonicalize_name(Requirement(d).name) for d in declared} - set(pinned)
    assert not missing, f"not pinned in constraints.txt: {sorted(missing)}"


def test_binder_installs_through_the_constraints_file():
    options, _, _ = binder_requirements()
    (constraints,) = options["-c"]
    assert (REQUIREMENTS.parent / constraints).resolve() == CONSTRAINTS, (
        "pip reads -c relative to the requirements file")
    assert not {"-i", "--index-url", "--no-index"} & set(options), "PyPI must stay the index"


def test_binder_torch_is_the_cpu_build_from_the_cpu_index():
    options, named, _ = binder_requirements()
    assert options.get("--extra-index-url") == [CPU_INDEX]
    (torch,) = [r for r in named if canonicalize_name(r.name) == "torch"]
    (specifier,) = torch.specifier
    assert specifier.operator == "==" and Version(specifier.version).local == "cpu", (
        f"{torch}: only an exact +cpu pin keeps pip from taking the CUDA build")
    assert Version(specifier.version).public == pins()["torch"].public


def test_binder_pins_agree_with_constraints():
    _, named, _ = binder_requirements()
    pinned = pins()
    for requirement in named:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"binder/requirements.txt: {name} is not pinned in constraints"
        for specifier in requirement.specifier:  # any version given must be the pinned one
            assert specifier.operator == "==", f"{requirement}: pin exactly, or not at all"
            assert Version(specifier.version).public == pinned[name].public, (
                f"{requirement} disagrees with constraints.txt ({name}=={pinned[name]})")


def test_binder_installs_the_package_with_the_widgets_extra():
    _, named, editable = binder_requirements()
    assert len(editable) == 1
    path, _, extras = editable[0].partition("[")
    assert (REPO / path).resolve() == REPO, "relative to the repository root, where pip runs"
    assert "widgets" in extras.rstrip("]").split(",")
    names = {canonicalize_name(r.name) for r in named}
    assert {"jupyterlab", "jupyterlab-widgets", "ipykernel"} <= names


def test_binder_python_is_this_python():
    runtime = RUNTIME.read_text().strip()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert runtime == f"python-{version}"
    requires = pyproject()["project"]["requires-python"]
    assert Requirement(f"python{requires}").specifier.contains(version)


BADGE = re.compile(r"\[!\[[^\]]*\]\(https://mybinder\.org/badge_logo\.svg\)\]\(([^)]+)\)")


def test_the_readme_ships_no_badge_to_a_missing_repository_but_says_how_to_set_it():
    """No live badge while the repository has no public home (it would 404); the README's
    template, inside a code block, opens the quickstart in JupyterLab once filled in."""
    text = README.read_text()
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    assert not BADGE.findall(prose), "a live Binder badge: point it at the public repository"
    (template,) = BADGE.findall(text)
    url = urllib.parse.urlsplit(template)
    assert url.netloc == "mybinder.org"
    assert url.path == "/v2/gh/<owner>/<repo>/HEAD"
    query = urllib.parse.parse_qs(url.query)
    assert query["urlpath"] == [f"lab/tree/{QUICKSTART}"]
    assert (REPO / QUICKSTART).is_file()


# --- an environment built from them ----------------------------------------------------------

PROBE = """
import json, sys
from importlib import metadata
import torch, ipywidgets
import ncet, ncet.widgets
from ncet.examples import load_example
model, shapes = load_example("mlp")
table = ncet.widgets.MappingTable(ncet.diagnose(model, *shapes))
print(json.dumps({
    "ncet": ncet.__file__,
    "rows": len(table.rows()),
    "cuda": torch.version.cuda,
    "versions": {d.metadata["Name"]: d.version for d in metadata.distributions()},
}))
"""


@pytest.mark.slow
def test_a_fresh_environment_from_the_binder_files_runs_the_workbench(tmp_path):
    """Build a new venv with `pip install -r binder/requirements.txt`, as Binder does.

    pip runs with `--retries 0`: PyPI and this machine's wheel folder (which holds the
    2.13.0+cpu torch wheel) are reachable here, PyTorch's CPU index is not, so pip notes the
    index once per package and goes on instead of retrying for minutes. pip's cache is reused.
    """
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--retries", "0", "-r", str(REQUIREMENTS)],
        cwd=REPO, capture_output=True, text=True, timeout=2400)
    assert install.returncode == 0, install.stdout[-4000:] + install.stderr[-4000:]
    broken = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True,
                            timeout=300)
    assert broken.returncode == 0, broken.stdout + broken.stderr

    probe = subprocess.run([python, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600)
    assert probe.returncode == 0, probe.stderr[-4000:]
    found = json.loads(probe.stdout.splitlines()[-1])
    assert Path(found["ncet"]).resolve().parent == REPO / "ncet", "the repository, editable"
    assert found["rows"] > 0
    assert found["cuda"] is None, "the CPU build of torch"
    versions = {canonicalize_name(k): Version(v) for k, v in found["versions"].items()}
    assert versions["torch"] == Version(f"{pins()['torch']}+cpu")
    for name in ("ipywidgets", "jupyterlab", "jupyterlab-widgets", "ipykernel", "matplotlib",
                 "pandas"):
        assert name in versions, f"{name} is not installed"
    for name, version in versions.items():
        if name in pins():
            assert version.public == pins()[name].public, (
                f"{name}: {version} installed, constraints.txt pins {pins()[name]}")
