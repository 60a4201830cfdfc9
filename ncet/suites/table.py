"""A suite's result table on disk: JSON lines, one line per finished instance, each appended
and synced on its own (write, flush, fsync), so an interrupted run loses at most the line
being written, and a re-run reads what is done."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

COLUMNS = (
    "benchmark", "onnx", "vnnlib", "timeout", "outcome", "reason", "message", "stage",
    "certified", "worst_ratio", "first_violation", "eps", "pieces", "tightened", "witnesses",
    "verdicts", "seconds_import", "seconds_check", "seconds_read", "seconds_margin",
    "seconds_tighten", "seconds_adjudicate", "seconds", "worker")
"""The result table's columns, in order (docs/suites.md says what each holds)."""


def read_table(path) -> dict[tuple[str, str], dict]:
    """The rows a result file holds, by (onnx, vnnlib); the last line of an instance wins.

    A missing file is an empty table. A last line cut short by an interruption (no newline)
    is cut off the file, so that the next line appended starts on a line of its own; any
    other line that is not a JSON object with `onnx` and `vnnlib` is an error.

    Raises:
        ValueError: A line that is not a result row (the file is not a suite's table).
    """
    path = Path(path)
    if not path.exists():
        return {}
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        data = data[:keep]
    rows = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or "onnx" not in row or "vnnlib" not in row:
            raise ValueError(f"{path}, line {number}: not a suite's result row (JSON lines "
                             "written by ncet.run_suite); give another out= file")
        rows[row["onnx"], row["vnnlib"]] = row
    return rows


def append_row(path, row: dict) -> None:
    """Append one row as a JSON line and sync it to disk before returning."""
    line = json.dumps({c: row.get(c) for c in COLUMNS}, allow_nan=True) + "\n"
    with open(path, "ab") as f:
        f.write(line.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def summary(frame) -> str:
    """A few lines on a result table: rows per outcome, reasons, verdicts, worst ratio and eps,
    and the time spent in each stage."""
    if len(frame) == 0:
        return "no instances"
    outcomes = Counter(frame["outcome"])
    lines = [f"{len(frame)} instances: " + ", ".join(
        f"{n} {o}" for o, n in sorted(outcomes.items(), key=lambda x: -x[1]))]
    reasons = Counter(r for o, r in zip(frame["outcome"], frame["reason"]) if o != "ok" and r)
    if reasons:
        lines.append("reasons: " + ", ".join(f"{n} {r}" for r, n in reasons.most_common(8)))
    verdicts = Counter(v for vs in frame["verdicts"] if isinstance(vs, dict) for v in vs.values())
    if verdicts:
        lines.append(f"{sum(verdicts.values())} counterexamples judged: " + ", ".join(
            f"{n} {v}" for v, n in verdicts.most_common()))
    ratio, eps = frame["worst_ratio"].dropna(), frame["eps"].dropna()
    if len(ratio):
        lines.append(f"certificates: worst ratio {ratio.max():.3g} over "
                     f"{frame.drop_duplicates('onnx')['certified'].notna().sum()} networks")
    if len(eps):
        lines.append(f"eps (max per instance): from {eps.min():.3g} to {eps.max():.3g}")
    per_network = frame.drop_duplicates("onnx")
    seconds = {"import": per_network["seconds_import"].sum(),
               "check": per_network["seconds_check"].sum(),
               **{s: frame[f"seconds_{s}"].sum() for s in
                  ("read", "margin", "tighten", "adjudicate")}}
    lines.append("seconds of work: " + ", ".join(f"{s} {v:.1f}" for s, v in seconds.items()))
    return "\n".join(lines)


__all__ = ["COLUMNS", "append_row", "read_table", "summary"]
