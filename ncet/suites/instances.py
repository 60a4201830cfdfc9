"""A suite's instances: the rows of a VNN-COMP `instances.csv` (onnx, vnnlib, timeout; paths
relative to the CSV's folder), and the counterexamples a results folder holds for each."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

WITNESS_SUFFIX = ".counterexample"
"""A VNN-COMP counterexample file's suffix."""


@dataclass(frozen=True)
class Instance:
    """One row of a suite: a network, a property and the competition's timeout (seconds).

    `onnx` and `vnnlib` are paths as strings, resolved against the CSV's folder; `benchmark`
    is that folder's name (or "" for rows given as a list)."""

    onnx: str
    vnnlib: str
    timeout: float | None = None
    benchmark: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the instance in a result table: (onnx, vnnlib)."""
        return self.onnx, self.vnnlib

    @property
    def stem(self) -> str:
        """`<onnx stem>_<vnnlib stem>`, the tail of its counterexamples' names."""
        return f"{_stem(self.onnx)}_{_stem(self.vnnlib)}"


def _stem(path: str) -> str:
    return Path(path).name.removesuffix(".gz").rsplit(".", 1)[0]


def _timeout(text: str, where: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: the timeout {text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{where}: the timeout {text!r} is not a positive number of seconds")
    return value


def read_instances(instances) -> list[Instance]:
    """The instances of a suite, in order, each once.

    Args:
        instances: The path of a VNN-COMP `instances.csv` (rows `onnx,vnnlib,timeout`, paths
            relative to its folder; `#` comments and blank lines skipped), or a list of rows:
            `Instance`s, or (onnx, vnnlib) / (onnx, vnnlib, timeout) tuples of paths.

    Returns:
        A list of `Instance`; a row whose (onnx, vnnlib) came before is dropped.

    Raises:
        FileNotFoundError: No such CSV file.
        ValueError: A row without two paths, or a timeout that is not a positive number.
    """
    if isinstance(instances, (str, os.PathLike)):
        path = Path(instances)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such instances file (a VNN-COMP "
                                    "instances.csv: onnx,vnnlib,timeout rows)")
        folder, benchmark = path.parent, path.parent.resolve().name
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = []
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = next(csv.reader([line]))
            where = f"{path}, line {number}"
            if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
                raise ValueError(f"{where}: {line!r} is not an onnx,vnnlib,timeout row")
            rows.append(Instance(os.path.abspath(folder / fields[0].strip()),
                                 os.path.abspath(folder / fields[1].strip()),
                                 _timeout(fields[2], where) if len(fields) > 2 else None,
                                 benchmark))
    else:
        rows = []
        for i, row in enumerate(instances):
            if isinstance(row, Instance):
                rows.append(row)
                continue
            row = tuple(row)
            if len(row) not in (2, 3):
                raise ValueError(f"instance {i}: {row!r} is not (onnx, vnnlib[, timeout])")
            timeout = _timeout(str(row[2]), f"instance {i}") if len(row) == 3 and \
                row[2] is not None else None
            rows.append(Instance(os.path.abspath(row[0]), os.path.abspath(row[1]), timeout))
    seen, unique = set(), []
    for row in rows:
        if row.key not in seen:
            seen.add(row.key)
            unique.append(row)
    return unique


def witnesses_for(results, instance: Instance) -> list[str]:
    """The counterexample files a VNN-COMP results folder holds for `instance`, sorted:
    `[<benchmark>/]<anything>__<onnx stem>_<vnnlib stem>.counterexample` (the competition's
    `<year>__<tool>__...` names), or `<onnx stem>_<vnnlib stem>.counterexample`; for an
    instance given without its benchmark (a list of rows), in the folder and every folder in
    it.

    Args:
        results: The folder, or None (no counterexamples).
        instance: The instance.
    """
    if results is None:
        return []
    folder = Path(results)
    found = set()
    inside = (f"{instance.benchmark}/",) if instance.benchmark else ("*/",)
    for where in ("", *inside):
        for path in folder.glob(f"{where}*{WITNESS_SUFFIX}"):
            name = path.name[:-len(WITNESS_SUFFIX)]
            if name == instance.stem or name.endswith("__" + instance.stem):
                found.add(str(path))
    return sorted(found)


__all__ = ["Instance", "WITNESS_SUFFIX", "read_instances", "witnesses_for"]
