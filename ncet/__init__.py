"""NCET: trace a PyTorch model into canonical GraphIR and prove the translation exact."""

from importlib import metadata as _metadata

from .changes import Comparison
from .differences import compare
from .errors import (
    ConversionError,
    GraphIRFormatError,
    NCETError,
    SupportBoundaryError,
    TraceError,
    UnsupportedOperatorError,
    from_caller,
)
from .evaluate import evaluate
from .exactness.check import check_exactness as _check_exactness
from .exactness.report import ExactnessEntry, ExactnessReport
from .format.file import load as _load
from .format.file import save as _save
from .frontend.conversion import convert, diagnose
from .frontend.report import ConversionReport, Row
from .ir import GraphIR, IRNode, Source
from .onnx.import_errors import ONNXImportError
from .passes import simplify
from .properties import Adjudication, Property, VNNLIBError, WitnessError
from .properties import adjudicate as _adjudicate
from .properties import read_vnnlib as _read_vnnlib
from .properties import read_witness as _read_witness
from .properties import write_vnnlib as _write_vnnlib
from .regions import Margin
from .regions import tighten as _tighten
from .regions.margin import float_margin as _float_margin
from .suites import run_suite as _run_suite

# NCET's errors from these read from the caller's line (docs/reliability.md; NCET_DEBUG=1
# keeps the internal frames); convert and diagnose are wrapped where they are defined.
check_exactness = from_caller(_check_exactness)
load, save = from_caller(_load), from_caller(_save)
read_vnnlib, write_vnnlib = from_caller(_read_vnnlib), from_caller(_write_vnnlib)
adjudicate, read_witness = from_caller(_adjudicate), from_caller(_read_witness)
float_margin = from_caller(_float_margin)
tighten = from_caller(_tighten)
run_suite = from_caller(_run_suite)  # imports Dask only when called

try:
    __version__ = _metadata.version("ncet")
    """The installed distribution's version ("unknown" when run from a bare checkout)."""
except _metadata.PackageNotFoundError:
    __version__ = "unknown"


@from_caller
def to_onnx(ir, path=None, *, profile="canonical", batch=None, opset=None, simplify=False):
    """Write `ir` as an ONNX model, one ONNX node (or a small documented pattern) per IR node.

    Needs the `onnx` extra (`pip install ncet[onnx]`); `import ncet` does not import onnx.
    Constants become initializers with the same bytes, static shapes become int64
    initializers, each node's doc_string carries its provenance, and the model's
    metadata_props carry the NCET and torch versions and the GraphIR's hash (the same for the
    GraphIR and the one its .ncet file loads back; docs/file-format.md).
    The same GraphIR gives the same bytes. See docs/export.md.

    Args:
        ir: The graph, e.g. from `convert`.
        path: If given, the model is also written there (atomically).
        profile: "canonical" (the natural ONNX spelling of each op_type), or "verifier"
            (the shape verification tools read: Flatten then Gemm(transB=1), batch 1, only
            the ops of `ncet.onnx.VERIFIER_OPS`).
        batch: None for a symbolic batch axis "N" (canonical; 1 for verifier), or a fixed
            positive batch size (verifier: only 1).
        opset: The ONNX opset of the default domain (18 or later); None for the profile's
            `default_opset` (canonical 21; verifier 18, which onnx2torch and older importers
            read).
        simplify: Export `ncet.simplify(ir)`'s graph instead (BatchNorm and the input
            normalisation folded, affine layers merged, identities dropped), once its
            certificate holds; `metadata_props["ncet.simplification"]` says so, with the
            passes applied. Certify the file with `check_onnx` against the simplified graph
            (docs/simplification.md).

    Returns:
        The onnx.ModelProto.

    Raises:
        ncet.onnx.ExportError: A node the profile cannot express exactly (the message names
            the node and the reason).
        ValueError: An unknown profile, a batch that is not a positive int, or an opset out
            of range; with `simplify=True`, a simplification whose certificate does not hold.
        TypeError: `ir` is not a GraphIR.
        ImportError: onnx is not installed.

    Example:
        >>> model = ncet.to_onnx(ncet.convert(net, (3, 32, 32)), "net.onnx")
    """
    from .onnx import to_onnx as export

    options = {} if opset is None else {"opset": opset}
    if not simplify:
        return export(ir, path, profile=profile, batch=batch, **options)
    from .passes.export import export_simplified

    return export_simplified(ir, path, export, profile=profile, batch=batch, **options)


@from_caller
def check_onnx(ir, onnx_model, *inputs, samples_per_scale=32, seed=0, local=True,
               end_to_end=True, threads=0, progress=False, keep_samples=256):
    """Certify an ONNX file against its GraphIR: an exported file (`to_onnx`), or the file
    an imported GraphIR came from (`from_onnx`). onnxruntime runs the file and every IR
    node's value is held to the same certified bound as `check_exactness` holds PyTorch's.

    For an imported GraphIR (its provenance is an ONNX file's) and a file that is not its
    export (no `ncet.graphir.hash` stamp, or another GraphIR's), the file is the original:
    it is imported again and compared with `ir` node by node and constant by constant (a
    difference is a violation at that node), and each IR node is checked at the ONNX value
    it is named after, the last value of the ONNX nodes it stands for (a MatMul and its
    Add: at the Add). onnxruntime runs a file without a batch axis, or with a batch of 1,
    one sample at a time (docs/onnx-import.md).
    Otherwise the file is an export, as follows.

    onnxruntime runs the file on its CPU provider with graph optimizations off and every IR
    node's value exposed (the ONNX value its pattern ends in, named after the node). Each
    node is checked node-local (the IR node in float64 on onnxruntime's own values of its
    inputs) and end to end (against the float64 reference run from the inputs, with error
    radii carried); the file's graph outputs are held to the reference too. Before any
    number, the file is compared with this GraphIR's export in the file's own profile, batch
    and opset (`to_onnx` is deterministic): a node, initializer, value_info entry or output
    that differs is a violation at the IR node it belongs to, and what no IR node owns (an
    added node, a local function) at every returned node. onnxruntime must load the file as
    given, not only the copy with every value exposed. onnxruntime's arithmetic is probed in
    its kernels (docs/exactness.md §6). Needs the `onnx` extra.

    Args:
        ir: The GraphIR the file was exported from (`to_onnx`) or imported from
            (`from_onnx`).
        onnx_model: The onnx.ModelProto, the path of the file, or its bytes.
        *inputs: Batched inputs; generated as `check_exactness` generates them when omitted.
            A file with a fixed batch size (`batch=1`, the verifier profile) is run in
            batches of that size; generated samples are rounded up to whole batches.
            Inputs that require grad are detached.
        samples_per_scale, seed, local, end_to_end, progress, keep_samples: As in
            `check_exactness`.
        threads: onnxruntime's intra-op threads, an int (0: its default, one per core).

    Returns:
        An ExactnessReport (`.ok`, `.first_violation`, `.runtime` "onnxruntime <version>").

    Raises:
        ValueError: The file's inputs or outputs are not the GraphIR's, the inputs do not
            match the IR or do not split into the file's fixed batch, `threads` is negative,
            or a GraphIR without operator nodes is given a file that is not its export.
        ncet.onnx.onnx_file.ONNXFileError: (a ValueError) The file does not parse, is over
            a reading limit, its external data cannot be read from the file's folder, it
            defines a name twice (two initializers, a graph input over an initializer, ...)
            or reads one before or without a definition (docs/export.md, "Reading a file
            safely"), or onnxruntime cannot load it as given
            (`onnx-unloadable`) or run it (`onnx-run-failed`): `.code`, `.name`, `.entries`.
        TypeError: `ir` is not a GraphIR, `onnx_model` neither a ModelProto nor a path, or
            `threads` not an int.
        ImportError: onnx or onnxruntime is not installed.

    Example:
        >>> report = ncet.check_onnx(ir, ncet.to_onnx(ir, "net.onnx"))
        >>> report.ok, report.first_violation
    """
    from .onnx.runtime import check_onnx as check

    return check(ir, onnx_model, *inputs, samples_per_scale=samples_per_scale, seed=seed,
                 local=local, end_to_end=end_to_end, threads=threads, progress=progress,
                 keep_samples=keep_samples)


@from_caller
def from_onnx(model):
    """Read an ONNX network into GraphIR: a second frontend onto the same canonical
    operators (docs/onnx-import.md).

    Every ONNX spelling of a piecewise-linear operator maps onto the op_type the spec gives
    its PyTorch spellings (Gemm and MatMul with a fixed weight, followed or not by an Add of
    a fixed bias: Linear; Relu: ReLU; Sub of a fixed mean: ElementwiseAffine; ...); the
    static shape arithmetic exporters write (Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape) is folded. Each IR node is named after the ONNX value it computes, and its
    `source` names its ONNX node(s): name, op type and index. Constants are the file's
    initializers, value for value (a MatMul's weight transposed to Linear's (out, in), as
    the report says). The graph inputs' first axis is read as the batch axis when it is
    symbolic, or 1 with at least one more axis, and GraphIR's shapes are per sample;
    `diagnose_onnx(model).notes` says how it was read. Certify the import with
    `check_onnx(ir, model)`. Needs the `onnx` extra.

    Args:
        model: A path, the file's bytes, or an onnx.ModelProto.

    Returns:
        The GraphIR.

    Raises:
        ONNXImportError: (a ConversionError) The first ONNX node outside the boundary,
            named with its op type, index and a stable reason code (`.code`); every such node
            at once: `diagnose_onnx`.
        ncet.onnx.onnx_file.ONNXFileError: (a ValueError) The file does not parse, defines
            a name twice, reads a value nothing defines, has a cycle, is over the reader's
            size limits, or its external data cannot be read safely (`.code`).
        TypeError: `model` is none of the accepted kinds.
        ImportError: onnx is not installed.

    Example:
        >>> ir = ncet.from_onnx("ACASXU_run2a_1_1_batch_2000.onnx")
        >>> ncet.check_onnx(ir, "ACASXU_run2a_1_1_batch_2000.onnx").ok
    """
    from .onnx.importer import from_onnx as read

    return read(model)


@from_caller
def diagnose_onnx(model):
    """What `from_onnx` makes of every node of an ONNX file, every problem at once: one row
    per graph input and per ONNX node (`Row.fx_name` the node's name, `.spelling` its op
    type, `.location` "<file> node <index>"), with a status, a stable reason code and a
    hint; `.notes` says how the batch axis was read; `.graph` holds the GraphIR when `.ok`.
    Never raises for a node outside the boundary. Needs the `onnx` extra.

    Args:
        model: A path, the file's bytes, or an onnx.ModelProto.

    Returns:
        A ConversionReport.

    Raises:
        ncet.onnx.onnx_file.ONNXFileError: The file cannot be read (see `from_onnx`).
        TypeError: `model` is none of the accepted kinds.
    """
    from .onnx.importer import diagnose_onnx as diagnose

    return diagnose(model)


@from_caller
def lint_onnx(model_or_path, tool):
    """List every node of an ONNX file that a verification tool would reject or silently
    mis-handle, with the node, the reason and the tool-side source (docs/export.md).

    Args:
        model_or_path: An onnx.ModelProto, a path, or the file's bytes.
        tool: One of `ncet.onnx.lint.LINT_TOOLS` ("abcrown", "marabou", "nnv", "eran").

    Returns:
        A LintReport (`.ok`, `.findings`, `str()`, `.to_dict()`, `.to_pandas()`).

    Raises:
        ValueError: An unknown tool, or a file that is not an ONNX model.
        ImportError: onnx is not installed.

    Example:
        >>> print(ncet.lint_onnx("net.onnx", tool="eran"))
    """
    from .onnx.lint import lint_onnx as lint

    return lint(model_or_path, tool)


__all__ = [
    "ConversionError", "ConversionReport", "ExactnessEntry", "ExactnessReport", "GraphIR",
    "GraphIRFormatError", "IRNode", "NCETError", "Row", "Source", "SupportBoundaryError",
    "TraceError", "UnsupportedOperatorError", "check_exactness", "convert", "diagnose",
    "check_onnx", "Comparison", "compare", "evaluate", "lint_onnx", "load", "save",
    "to_onnx", "from_onnx", "diagnose_onnx", "ONNXImportError", "Property", "VNNLIBError",
    "read_vnnlib", "write_vnnlib", "adjudicate", "Adjudication", "WitnessError",
    "read_witness", "float_margin", "Margin", "tighten", "simplify", "run_suite",
]
