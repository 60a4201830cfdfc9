"""`ncet margin NET PROPERTY [-o tightened.vnnlib]`: the float32 margin of a network over a
property's input region (`ncet.float_margin`), reported against the exact output's range and
the property's own rows, and the property tightened by it (`ncet.tighten`) written as
VNN-LIB and read back (docs/margins.md)."""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

import ncet

from ..properties.property import Property, Row
from ..properties.rational import decimal_text, fraction
from ..regions.tightening import grown_by
from .commands import UsageError
from .importing import error_record
from .records import document, dumps
from .terminal import name_text

OK, FAILED = 0, 1
"""Exit statuses: 0 the margin computed (and the tightened file written and read back), 1 an
input refused or the written file not reading back; argparse and UsageError give 2."""

SHOWN = 20
"""Outputs and rows printed as text (--json lists every one)."""
TOP_NODES = 5
"""Nodes listed as where eps comes from."""
INPUT_ROUNDING = "<input rounding>"

DESCRIPTION = (
    "Bound how far the network's float32 output can be from its exact (real-arithmetic) "
    "output over every input of PROPERTY's region (ncet.float_margin), and grow the "
    "property's unsafe set by that margin (ncet.tighten): a verifier's `unsat` for the "
    "tightened property, reached in real arithmetic, then holds for the network as deployed "
    "in float32. NET is an ONNX file (read with ncet.from_onnx) or a GraphIR file (.ncet); "
    "PROPERTY a VNN-LIB file. Prints eps per output beside the exact output's range over "
    "the region; per unsafe row, how much it grows and how far the exact output stays out "
    "of it (interval arithmetic on the range, where that shows it); and the nodes whose "
    "rounding contributes most. With -o FILE the tightened property is written as VNN-LIB "
    "(atomically) and read back to check it. Exit status 0 when the margin is computed (and "
    "the file written and read back equal); 1 when NET or PROPERTY is refused (one line on "
    "stderr with its reason code) or the written file does not read back equal; 2 for usage "
    "errors (a missing file, a NET that is neither .onnx nor .ncet, an unwritable -o).")


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The positional NET and PROPERTY, -o and --input-rounding."""
    command.add_argument("net", metavar="NET", help="an ONNX model (net.onnx) or a GraphIR "
                         "file (net.ncet)")
    command.add_argument("property", metavar="PROPERTY", help="a VNN-LIB file (prop.vnnlib)")
    command.add_argument("-o", "--output", default=None, metavar="FILE", help=(
        "write the tightened property there as VNN-LIB (atomically), then read it back"))
    command.add_argument("--input-rounding", action="store_true", help=(
        "eps also covers rounding each input (a decimal of the property's box) to float32, "
        "as a deployment that reads the bounds as float32 does"))


def _network(path: str):
    """The GraphIR of NET: an ONNX file imported, or a .ncet file loaded."""
    if path.lower().endswith(".onnx"):
        try:
            import onnx  # noqa: F401
        except ImportError as error:
            raise UsageError("reading an ONNX NET needs onnx, which is not installed: "
                             "pip install 'ncet[onnx]', or give a GraphIR file (.ncet)"
                             ) from error
        return ncet.from_onnx(path)
    if path.lower().endswith(".ncet"):
        return ncet.load(path)
    raise UsageError(f"NET {path!r} is neither an ONNX file (.onnx) nor a GraphIR file "
                     "(.ncet): give e.g. net.onnx, or convert a PyTorch model first with "
                     "`ncet convert TARGET -o net.ncet`")


def run_margin(args: argparse.Namespace) -> int:
    """`ncet margin NET PROPERTY`: the margin, the report, the tightened file with -o."""
    for name in ("net", "property"):
        where = Path(getattr(args, name))
        if not where.is_file():
            what = "a folder" if where.is_dir() else "no such file"
            raise UsageError(f"{name.upper()} {getattr(args, name)!r}: {what}")
    if args.output is not None and Path(args.output).is_dir():
        raise UsageError(f"-o {args.output!r} is a folder: give a file, e.g. "
                         "-o prop.tightened.vnnlib")
    try:
        network = _network(args.net)
        prop = ncet.read_vnnlib(args.property)
        margin = ncet.float_margin(network, prop, input_rounding=args.input_rounding)
        tight = ncet.tighten(prop, margin)
    except UsageError:
        raise
    except (ncet.NCETError, ValueError, OSError) as error:
        return _refused(args, error_record(error, args.net, documented=True))
    except Exception as error:  # noqa: BLE001  a hostile file: one line, never a traceback
        return _refused(args, error_record(error, args.net, "ncet margin"))
    rows = row_records(prop, tight, margin)
    top = top_contributions(margin)
    written, error = _write(args, prop, tight) if args.output is not None else (None, None)
    ok = error is None
    decided = bool(rows) and all(_polytopes_excluded(rows, deployed=True))
    if args.json:
        print(dumps(document("margin", net=args.net, property=args.property, ok=ok,
                             error=error, margin=margin.to_dict(), rows=rows,
                             decided_as_deployed=decided, top_contributions=top,
                             output=written)))
    else:
        _print_report(args, margin, rows, top, decided)
        _print_written(args, written, error)
    if error is not None:
        first = error["message"].splitlines()[0]
        print(f"ncet margin: error: {name_text(first)}", file=sys.stderr)
    return OK if ok else FAILED


def _refused(args: argparse.Namespace, record: dict) -> int:
    """An input refused: the JSON document with `error`, one line on stderr, status 1."""
    if args.json:
        print(dumps(document("margin", net=args.net, property=args.property, ok=False,
                             error=record, margin=None, rows=[], decided_as_deployed=False,
                             top_contributions=[], output=None)))
    message = record["message"].strip()
    first = message.splitlines()[0] if message else "refused"
    print(f"ncet margin: error: {name_text(first)}", file=sys.stderr)
    return FAILED


def _write(args: argparse.Namespace, prop: Property, tight: Property
           ) -> tuple[dict | None, dict | None]:
    """Write the tightened property, read it back: (the output record, an error record)."""
    try:
        ncet.write_vnnlib(tight, args.output)
    except OSError as error:
        raise UsageError(f"cannot write {args.output!r}: {error.strerror or error}. Give a "
                         "writable path, e.g. -o prop.tightened.vnnlib") from error
    shared = 1 if prop.separable else len(prop.cases)  # one unsafe set, or one per box
    grown = sum(1 for case, again in zip(prop.cases[:shared], tight.cases)
                for p, q in zip(case.unsafe, again.unsafe)
                for row, other in zip(p.rows, q.rows) if row is not other)
    record = {"path": args.output, "bytes": Path(args.output).stat().st_size,
              "rows_grown": grown, "read_back": False}
    try:
        again = ncet.read_vnnlib(args.output)
    except (ncet.NCETError, ValueError, OSError) as error:
        code = getattr(error, "code", None)
        return record, {"code": code if isinstance(code, str) else None,
                        "message": f"the written {args.output} does not read back: {error}"}
    if again != tight:
        return record, {"code": None, "message": f"the written {args.output} reads back as "
                        "a different property; please report it"}
    record["read_back"] = True
    return record, None


# -- the rows against the range ------------------------------------------------------------


def _number(value: Fraction) -> float:
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def out_by(row: Row, lower: list[Fraction], upper: list[Fraction]) -> Fraction:
    """A lower bound, over every y with lower <= y <= upper, of a . y - b: how far the row's
    half-space stays from every such y (> 0: none of them is in it), exactly."""
    terms, b, _ = row
    least = Fraction(0)
    for j, c in terms:
        c = fraction(c)
        least += c * (lower[j] if c > 0 else upper[j])
    return least - fraction(b)


def _excluded(distance: Fraction, strict: bool) -> bool:
    return distance > 0 or (distance == 0 and strict)


def row_text(row: Row) -> str:
    """a . y <= b as a person reads it: `Y_0 <= 0.5`, `Y_1 >= 2`, `Y_0 - Y_1 <= 0`."""
    terms, b, strict = row
    le, ge = ("<", ">") if strict else ("<=", ">=")
    value = fraction(b)
    if len(terms) == 1 and fraction(terms[0][1]) == -1:
        return f"Y_{terms[0][0]} {ge} {_constant(-value)}"
    parts = []
    for j, c in terms:
        c = fraction(c)
        size = "" if abs(c) == 1 else f"{_constant(abs(c))}*"
        sign = ("-" if c < 0 else "") if not parts else (" - " if c < 0 else " + ")
        parts.append(f"{sign}{size}Y_{j}")
    return f"{''.join(parts) or '0'} {le} {_constant(value)}"


def _shown(value) -> str:
    """A constant as written (a numeral), or a Fraction's decimal."""
    return value if isinstance(value, str) else _constant(fraction(value))


def _constant(value: Fraction) -> str:
    text = decimal_text(value)
    if text is None:
        return str(value)
    return text if len(text) <= 24 else f"{_number(value):.17g}"


def row_records(prop: Property, tight: Property, margin) -> list[dict[str, Any]]:
    """One record per unsafe row (of the first box when every box shares one unsafe set):
    where it is, its text, b before and after, the growth, and how far the exact output's
    range stays out of the row before and after tightening."""
    lower = [Fraction(float(v)) for v in margin.lower.tolist()]
    upper = [Fraction(float(v)) for v in margin.upper.tolist()]
    eps = [Fraction(float(v)) for v in margin.eps.tolist()]
    cases = range(1 if prop.separable else len(prop.cases))
    records = []
    for k in cases:
        for d, (p, q) in enumerate(zip(prop.cases[k].unsafe, tight.cases[k].unsafe)):
            for r, (row, grown) in enumerate(zip(p.rows, q.rows)):
                before, after = out_by(row, lower, upper), out_by(grown, lower, upper)
                records.append({
                    "box": None if prop.separable else k, "polytope": d, "row": r,
                    "text": row_text(row), "strict": row[2],
                    "b": _shown(row[1]), "tightened_b": _shown(grown[1]),
                    "tightened_text": row_text(grown),
                    "grown_by": _number(grown_by(row, eps)),
                    "out_by": _number(before), "excluded": _excluded(before, row[2]),
                    "excluded_as_deployed": _excluded(after, row[2])})
    return records


def _polytopes_excluded(rows: list[dict], deployed: bool) -> list[bool]:
    """Per (box, polytope): does some row keep the range out of it (exact outputs, or
    float32 outputs when `deployed`)?"""
    key = "excluded_as_deployed" if deployed else "excluded"
    out: dict[tuple, bool] = {}
    for row in rows:
        where = (row["box"], row["polytope"])
        out[where] = out.get(where, False) or row[key]
    return list(out.values())


def top_contributions(margin, count: int = TOP_NODES) -> list[dict[str, Any]]:
    """The nodes whose rounding makes up most of eps: each node's largest share of an
    output's eps, the largest first (nodes contributing nothing left out)."""
    eps = margin.eps.double()
    shares = []
    for node, part in margin.contributions.items():
        part, positive = part.double(), eps > 0
        ratio = torch.where(positive, part / torch.where(positive, eps, 1.0), 0.0)
        worst = int(ratio.argmax()) if ratio.numel() else 0
        shares.append({"node": node, "share": float(ratio[worst]) if ratio.numel() else 0.0,
                       "output": worst, "largest": float(part.max()) if part.numel() else 0.0})
    shares.sort(key=lambda s: (-s["share"], s["node"]))
    return [s for s in shares if s["share"] > 0][:count]


# -- text -----------------------------------------------------------------------------------


def _print_report(args, margin, rows, top, decided) -> None:
    boxes = f"{margin.boxes} box{'es' * (margin.boxes != 1)}"
    pieces = f"{margin.pieces} piece{'s' * (margin.pieces != 1)}"
    rounding = "covers" if margin.input_rounding else "does not cover"
    print(f"{margin.dtype} margin of {name_text(args.net)} over {name_text(args.property)}: "
          f"{boxes}, {pieces}, {margin.seconds:.2f} s; eps {rounding} the input's rounding "
          f"to {margin.dtype}")
    if margin.arithmetic:
        print(f"arithmetic: {margin.arithmetic}")
    print()
    table = [("output", "eps", "exact output's range", "eps / its width")]
    m = margin.num_outputs
    for j in range(min(m, SHOWN)):
        eps, low, high = (float(v[j]) for v in (margin.eps, margin.lower, margin.upper))
        width = high - low
        table.append((f"Y_{j}", f"{eps:.3g}", f"[{low:.9g}, {high:.9g}]",
                      f"{eps / width:.2g}" if width > 0 else "-"))
    print(_table(table))
    if m > SHOWN:
        print(f"... {m - SHOWN} more outputs (--json lists every one)")
    print()
    table = [("unsafe row", "grown by", "exact output stays out by")]
    for row in rows[:SHOWN]:
        where = "" if row["box"] is None else f"box {row['box']}: "
        if not row["excluded"]:
            verdict = "-, the range reaches the row"
        elif row["excluded_as_deployed"]:
            verdict = f">= {row['out_by']:.3g}, float32 too"
        else:
            verdict = f">= {row['out_by']:.3g}, not float32"
        table.append((where + name_text(row["text"]), f"{row['grown_by']:.3g}", verdict))
    print(_table(table))
    if len(rows) > SHOWN:
        print(f"... {len(rows) - SHOWN} more rows (--json lists every one)")
    unstable = [(node, n, total) for node, (n, total) in margin.unstable.items() if n]
    if unstable:
        print("\npossibly unstable over the region: " + ", ".join(
            f"{name_text(node)} {n}/{total}" for node, n, total in unstable))
    if top:
        print("\nwhere eps comes from (a node's largest share of an output's eps):")
        width = max(len(name_text(t["node"])) for t in top)
        for t in top:
            print(f"  {name_text(t['node']).ljust(width)}  {100 * t['share']:5.1f}%  "
                  f"(Y_{t['output']})")
    print()
    if decided:
        print("the range alone keeps every float32 output out of the unsafe set: safe as "
              "deployed")
    elif rows and all(_polytopes_excluded(rows, deployed=False)):
        print("the range keeps every exact output out of the unsafe set, but not by more "
              "than eps: float32 may enter it")
    else:
        print("the range does not decide the property: give a verifier the tightened "
              "property (-o FILE)")


def _print_written(args, written, error) -> None:
    if args.output is None:
        return
    if written is not None and error is None:
        grown = written["rows_grown"]
        print(f"wrote {name_text(args.output)}: {grown} row{'s' * (grown != 1)} grown, "
              f"{written['bytes']:,} bytes; read back equal")
    elif written is not None:
        print(f"wrote {name_text(args.output)}, which does not read back equal")


def _table(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                     for line in lines)
