"""What a suite's tasks do, with no Dask in sight: import and certify a network (once per
network), then per instance read the property, bound the float32 margin, tighten the property
and judge the counterexamples given for it. Each returns a plain record; nothing raises out of
a task but an interruption (a row that fails is a row with its error)."""

from __future__ import annotations

import functools
import gzip
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ncet

from ..regions.margin import SPLIT_DIMENSIONS
from .instances import Instance, witnesses_for

STAGES = ("import", "check", "read", "margin", "tighten", "adjudicate")
"""The stages of an instance, in order; each has a `seconds_<stage>` column."""

OUTCOMES = ("ok", "not-exact", "refused", "error", "timeout")
"""A row's outcome: every stage done and the import certified; every stage done but the
import's certificate does not hold; an input NCET refuses (`reason` its stable code); an
unexpected exception (`reason` its type); the row's time budget spent (`reason` "timeout")."""


@dataclass(frozen=True)
class Options:
    """How each instance is worked (see `run_suite`)."""

    samples: int = 8
    splits: int | None = 1
    check: bool = True
    results: str | None = None
    tightened: str | None = None
    timeout: float | None = None


IMPORTS_KEPT = 8
"""Networks each process keeps imported (`imported`), most recently used first."""


@dataclass(frozen=True)
class Network:
    """A network's import certified, or the reason it was not imported or certified. The
    GraphIR itself stays in the process that imported it (`imported`): importing is cheaper
    than shipping it (from_onnx takes 0.15 s on mnist_fc's largest network, a save and a
    load of its GraphIR 0.9 s), so a row run elsewhere imports the file again, once per
    process; the certificate (the expensive part) is computed once per network."""

    onnx: str
    failure: dict | None = None
    certified: bool | None = None
    worst_ratio: float | None = None
    first_violation: str | None = None
    seconds_import: float | None = None
    seconds_check: float | None = None


class _Spent(Exception):
    """The row's time budget is spent (checked between stages)."""


def failure_of(error: BaseException, stage: str) -> dict:
    """The row fields of an exception raised in `stage`: refused with NCET's stable reason
    code when the error has one, else an error named by its type."""
    code = getattr(error, "code", None)
    text = str(error).strip() or type(error).__name__
    if isinstance(code, str) and code:
        return {"outcome": "refused", "reason": code, "message": text, "stage": stage}
    return {"outcome": "error", "reason": type(error).__name__, "message": text,
            "stage": stage}


def _model(path: str):
    """The path to read, or the bytes of a gzipped file."""
    return gzip.decompress(Path(path).read_bytes()) if path.endswith(".gz") else path


@functools.lru_cache(maxsize=IMPORTS_KEPT)
def _import(onnx: str, mtime_ns: int, size: int):
    return ncet.from_onnx(_model(onnx))


def imported(onnx: str):
    """`ncet.from_onnx(onnx)`, kept per process (a changed file is imported again)."""
    stat = os.stat(onnx)
    return _import(onnx, stat.st_mtime_ns, stat.st_size)


def import_network(onnx: str, options: Options) -> Network:
    """`ncet.from_onnx(onnx)`, then `ncet.check_onnx(ir, onnx)` unless `options.check` is
    False. Never raises for a refused or broken file: the Network says why."""
    start = time.perf_counter()
    try:
        model = _model(onnx)
        ir = imported(onnx)
    except Exception as error:  # noqa: BLE001 (a broken file is a row, not a dead run)
        return Network(onnx, failure=failure_of(error, "import"),
                       seconds_import=time.perf_counter() - start)
    done = time.perf_counter()
    if not options.check:
        return Network(onnx, seconds_import=done - start)
    try:
        report = ncet.check_onnx(ir, model, samples_per_scale=options.samples, threads=1,
                                 keep_samples=0)
    except Exception as error:  # noqa: BLE001
        return Network(onnx, failure=failure_of(error, "check"), seconds_import=done - start,
                       seconds_check=time.perf_counter() - done)
    first = report.first_violation
    return Network(onnx, certified=bool(report.ok), worst_ratio=float(report.worst_ratio),
                   first_violation=None if first is None else first.name,
                   seconds_import=done - start, seconds_check=time.perf_counter() - done)


def _tightened_path(folder: str, instance: Instance) -> Path:
    return Path(folder) / f"{instance.stem}.tightened.vnnlib"


def run_row(network: Network, instance: Instance, options: Options) -> dict:
    """One result row for `instance` (columns: docs/suites.md)."""
    start = time.perf_counter()
    row: dict[str, Any] = {
        "benchmark": instance.benchmark, "onnx": instance.onnx, "vnnlib": instance.vnnlib,
        "timeout": instance.timeout, "outcome": None, "reason": None, "message": None,
        "stage": None, "certified": network.certified, "worst_ratio": network.worst_ratio,
        "first_violation": network.first_violation, "eps": None, "pieces": None,
        "tightened": None, "witnesses": 0, "verdicts": {},
        "seconds_import": network.seconds_import, "seconds_check": network.seconds_check,
        **{f"seconds_{stage}": None for stage in STAGES[2:]}, "seconds": None,
        "worker": _worker()}
    budget = options.timeout if options.timeout is not None else instance.timeout
    stage = "read"

    def done(name: str, since: float) -> float:
        now = time.perf_counter()
        row[f"seconds_{name}"] = now - since
        if budget is not None and now - start > budget:
            raise _Spent(name)
        return now

    try:
        if network.failure is not None:
            row.update(network.failure)
            return row
        since = start
        prop = ncet.read_vnnlib(instance.vnnlib)
        since = done(stage, since)
        stage = "margin"
        splits = options.splits if options.splits is None or \
            prop.num_inputs <= SPLIT_DIMENSIONS else 1  # as the margin's own default splits
        margin = ncet.float_margin(imported(instance.onnx), prop, splits=splits)
        row["eps"], row["pieces"] = float(margin.eps.max()), int(margin.pieces)
        since = done(stage, since)
        stage = "tighten"
        tight = ncet.tighten(prop, margin)
        if options.tightened is not None:
            path = _tightened_path(options.tightened, instance)
            path.parent.mkdir(parents=True, exist_ok=True)
            ncet.write_vnnlib(tight, path)
            row["tightened"] = str(path)
        since = done(stage, since)
        stage = "adjudicate"
        found = witnesses_for(options.results, instance)
        row["witnesses"] = len(found)
        for witness in found:
            try:
                verdict = ncet.adjudicate(_model(instance.onnx), prop, witness).verdict
            except Exception as error:  # noqa: BLE001 (one bad witness: its verdict says so)
                verdict = f"refused: {failure_of(error, stage)['reason']}"
            row["verdicts"][Path(witness).name] = verdict
        done(stage, since)
        row["outcome"] = "ok" if network.certified in (True, None) else "not-exact"
    except _Spent as spent:
        row.update(outcome="timeout", reason="timeout", stage=str(spent), message=(
            f"the row's budget of {budget:g} s was spent by the end of its {spent} stage "
            f"({time.perf_counter() - start:.3g} s)"))
    except Exception as error:  # noqa: BLE001
        row.update(failure_of(error, stage))
    finally:
        row["seconds"] = time.perf_counter() - start
    return row


def _worker() -> str | None:
    """The Dask worker's address, when the row runs on one."""
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return None


__all__ = ["OUTCOMES", "STAGES", "Network", "Options", "failure_of", "import_network",
           "imported", "run_row"]
