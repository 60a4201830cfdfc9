"""`to_onnx(..., simplify=True)`: the simplified graph exported once its certificate holds,
the verdict written into the file's metadata."""

from __future__ import annotations

from ..format.atomic import atomic_writer
from ..ir import GraphIR
from .simplification import simplify

METADATA_KEY = "ncet.simplification"
"""The file's `metadata_props` entry with the simplification's verdict (`summary`)."""


def summary(report) -> str:
    """The certified verdict without the bound's digits, which may differ in the last place
    between CPUs: the same GraphIR still gives the same bytes."""
    counts: dict[str, int] = {}
    for change in report.applied:
        counts[change.pass_name] = counts.get(change.pass_name, 0) + 1
    done = ", ".join(f"{k} x{v}" for k, v in counts.items()) or "no change"
    return (f"CERTIFIED by ncet.simplify ({report.samples.split(':')[0]}): {report.nodes_before} "
            f"operator nodes -> {report.nodes_after} ({done})")


def export_simplified(ir: GraphIR, path, export, **options):
    """`export(simplify(ir))` with the certificate's verdict in the metadata, written to
    `path` (atomically) when given.

    Raises:
        ValueError: The certificate does not hold (its verdict says where).
    """
    simplified, report = simplify(ir)
    if not report.ok:
        raise ValueError(f"to_onnx(simplify=True): the simplification is not certified, so "
                         f"nothing is written ({report.verdict()}); export without "
                         "simplify=True")
    model = export(simplified, None, **options)
    model.metadata_props.add(key=METADATA_KEY, value=summary(report))
    if path is not None:
        with atomic_writer(path) as f:
            f.write(model.SerializeToString())
    return model
