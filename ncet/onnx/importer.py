"""from_onnx: an ONNX file read into canonical GraphIR, a second frontend onto the operators
the spec gives PyTorch's spellings (docs/onnx-import.md). Each IR node is named after the
ONNX value its counterpart node writes, so `check_onnx` holds onnxruntime's value of that
name in the original file to the node's certified bound; constants are the file's
initializers, value for value."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from ..errors import from_caller
from ..frontend.report import ConversionReport, Row
from ..ir import CONSTANT_ATTRS, GraphIR, IRNode, Source
from .import_errors import IMPORT_STATUS, ImportRejection, ONNXImportError
from .import_shapes import ShapeError, output_shape
from .import_static import BATCH, fold
from .onnx_file import ONNXFileError, read_model

DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64"}
"""The ONNX element types a graph tensor may have, by the GraphIR dtype they become."""

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}

BATCH_MODES = {
    "symbolic": "the graph inputs' first axis is symbolic ({dims}): it is the batch axis; "
                "GraphIR's shapes are per sample, without it",
    "fixed": "the graph inputs' first axis is 1 ({dims}): read as a batch axis of size 1, "
             "so GraphIR's shapes are per sample, without it; the file runs one sample at "
             "a time",
    "none": "the graph inputs have no batch axis ({dims}: rank 1, or a first axis other "
            "than 1): each is one sample as it stands, GraphIR's per-sample shapes are the "
            "file's, and the file runs one sample at a time",
}
"""How the graph inputs' first axis is read, as the report says it."""


@dataclass(frozen=True, slots=True)
class Tensor:
    """A value that depends on the graph inputs: the IR node computing it, its per-sample
    shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class Importer:
    """One ONNX graph read node by node into IR nodes and constants."""

    def __init__(self, model: onnx.ModelProto, label: str, strict: bool):
        self.model, self.graph, self.label, self.strict = model, model.graph, label, strict
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.values: dict[str, Tensor | np.ndarray] = {}
        self.failed: set[str] = set()
        self.nodes: list[IRNode] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.lifted: dict[str, str] = {}
        self.rows: list[Row | None] = [None] * len(self.graph.node)
        self.input_rows: list[Row] = []
        self.notes: list[str] = []
        self.uses: dict[str, list[int]] = {}
        for i, node in enumerate(self.graph.node):
            for name in node.input:
                if name:
                    self.uses.setdefault(name, []).append(i)
        self.producers = {name: i for i, node in enumerate(self.graph.node)
                          for name in node.output if name}
        self.graph_outputs = {o.name for o in self.graph.output}
        self.file_names = {v.name for v in self.graph.input} | \
            {t.name for t in self.graph.initializer} | \
            {name for node in self.graph.node for name in node.output}
        self.exported = any(p.key == "ncet.graphir.hash" for p in model.metadata_props)
        self.absorbed: dict[int, tuple[str, int]] = {}  # node -> (op_type, absorbing node)
        self.pads: dict[str, tuple[Tensor, list[int], int]] = {}  # a Pad's value -> folded
        self.pad_modes: dict[str, str] = {}  # a folded Pad's value -> Conv2d padding_mode
        self.output_name: str | None = None  # the export's <output> of <output>/<position>
        self.batch = "symbolic"
        self.offset = 1
        self.ghosts: set[str] = set()
        self.sparse = {t.values.name for t in self.graph.sparse_initializer}
        self.checker = onnx.checker.C.CheckerContext()
        self.checker.ir_version = model.ir_version
        self.checker.opset_imports = {o.domain: o.version for o in model.opset_import}
        self.inferred: dict[str, Tensor] | None = None  # ONNX's shape inference, if asked

    # -- provenance --------------------------------------------------------------------------

    def node_name(self, index: int) -> str:
        return self.graph.node[index].name or f"#{index}"

    def source(self, indices: tuple[int, ...]) -> Source:
        nodes = [self.graph.node[i] for i in indices]
        where = ", ".join(str(i) for i in indices)
        return Source(" + ".join(self.node_name(i) for i in indices), "onnx",
                      " + ".join(n.op_type for n in nodes), "", "",
                      f"{self.label} node{'s' if len(indices) > 1 else ''} {where}")

    # -- values ------------------------------------------------------------------------------

    def _not_sparse(self, name: str, what: str) -> None:
        if name in self.sparse:
            raise ImportRejection("onnx-static-computation", f"{what} {name!r} is a sparse "
                                  "initializer", "store it dense (onnx.numpy_helper."
                                  "from_array) and import again")

    def tensor(self, name: str, what: str = "the operand") -> Tensor:
        self._not_sparse(name, what)
        value = self.values.get(name)
        if not isinstance(value, Tensor):
            raise ImportRejection("onnx-dynamic-operand", f"{what} {name!r} is fixed where a "
                                  "graph tensor is expected")
        return value

    def static(self, name: str, what: str) -> np.ndarray:
        self._not_sparse(name, what)
        value = self.values.get(name)
        if not isinstance(value, np.ndarray):
            raise ImportRejection("onnx-dynamic-operand",
                                  f"{what} {name!r} depends on the graph inputs; it must be "
                                  "fixed (an initializer, a Constant or folded shape "
                                  "arithmetic)")
        return value

    def static_ints(self, name: str, what: str, batch_ok: bool = False) -> np.ndarray:
        """A fixed operand that must hold integers (indices, axes, starts, a shape): of an
        integer dtype, and not the batch size unless `batch_ok` (a Reshape's target)."""
        value = self.static(name, what)
        if value.dtype.kind not in "iu":
            raise ImportRejection("onnx-malformed", f"{what} {name!r} is {value.dtype}, not "
                                  "integers", "onnxruntime refuses it too: check the file")
        if not batch_ok and (value == BATCH).any():
            raise ImportRejection("onnx-batch-axis", f"{what} {name!r} is computed from the "
                                  "batch size, which is not known at import",
                                  "give fixed values")
        return value

    def lift(self, name: str, array: np.ndarray, dtype: str, what: str) -> str:
        """A fixed array as an IR constant, under the file's name when it is the file's own
        value (an initializer or a Constant's output), else under `name`; refused when it is
        not finite or not of the graph tensor's dtype."""
        if array.dtype != np.dtype(dtype):
            raise ImportRejection("onnx-dtype", f"{what} {name!r} is {array.dtype}, the graph "
                                  f"tensor {dtype}")
        if not np.isfinite(array).all():
            raise ImportRejection("onnx-constant-not-finite", f"{what} {name!r} holds NaN or "
                                  "infinity")
        if name in self.constants:
            held = self.constants[name].numpy()
            if held.shape != array.shape or held.tobytes() != array.tobytes():
                raise ImportRejection("onnx-malformed", f"two different values would share "
                                      f"the constant name {name!r}")
            return name
        self.constants[name] = torch.from_numpy(np.array(array, copy=True))
        return name

    def derived(self, base: str, array: np.ndarray, dtype: str, what: str, how: str) -> str:
        """A constant NCET arranges from the file's (`how`, e.g. "transposed"), under a name
        no value of the file has (graph inputs, initializers, node outputs) and no other
        derived constant holds."""
        array = np.ascontiguousarray(array)
        name, n = f"{base}:{how}", 1
        while name in self.file_names or (name in self.constants and (
                self.constants[name].numpy().shape != array.shape or
                self.constants[name].numpy().tobytes() != array.tobytes())):
            name, n = f"{base}:{how}{n}", n + 1
        return self.lift(name, array, dtype, what)

    def emit(self, op_type: str, inputs: list[Tensor], attrs: dict, name: str,
             indices: tuple[int, ...]) -> Tensor:
        """Append one IR node computing ONNX value `name` from `inputs`, its shape worked
        out from theirs (`import_shapes`)."""
        dtypes = {t.dtype for t in inputs}
        if len(dtypes) > 1:
            raise ImportRejection("onnx-dtype", f"operands of dtypes {sorted(dtypes)}")
        dtype = inputs[0].dtype
        source = self.source(indices)
        consts = {k: tuple(v.shape) for k, v in self.constants.items() if k in attrs.values()}
        try:
            shape = output_shape(op_type, attrs, [t.shape for t in inputs], consts)
        except ShapeError as exc:
            raise ImportRejection("onnx-attribute", f"{op_type} with these operands does not "
                                  f"compute: {exc}") from None
        node = IRNode(name, op_type, tuple(t.name for t in inputs), attrs, shape, dtype, source)
        self.nodes.append(node)
        tensor = Tensor(name, shape, dtype)
        self.values[name] = tensor
        return tensor

    def absorb(self, index: int, by: int, op_type: str) -> None:
        """Node `index` is computed as part of node `by`'s IR node (a MatMul's Add)."""
        self.absorbed[index] = (op_type, by)

    def is_read(self, value: str) -> bool:
        """Whether a node or the graph's outputs read `value` ("" is no value)."""
        return bool(value) and (bool(self.uses.get(value)) or value in self.graph_outputs)

    def only_use(self, value: str) -> int | None:
        """The one node reading `value`, when exactly one does and it is no graph output."""
        users = self.uses.get(value, [])
        return users[0] if len(users) == 1 and value not in self.graph_outputs else None

    # -- the walk ----------------------------------------------------------------------------

    def run(self) -> ConversionReport:
        for init in self.graph.initializer:
            try:
                self.values[init.name] = numpy_helper.to_array(init)
            except Exception as exc:  # noqa: BLE001 - data that does not fit its dims, ...
                raise ONNXFileError("onnx-invalid", f"initializer {init.name!r} cannot be "
                                    f"read: {str(exc).splitlines()[0][:200]}") from None
        self._inputs()
        if not self.input_rows or all(r.status == "mapped" for r in self.input_rows):
            for index, node in enumerate(self.graph.node):
                self.rows[index] = self._node(index, node)
        else:
            for index in range(len(self.graph.node)):
                self.rows[index] = self._row(index, None, "skipped", None, "")
        graph = self._finish()
        return ConversionReport(tuple(self.input_rows) + tuple(self.rows), graph,
                                notes=tuple(self.notes),
                                unit="graph inputs and ONNX nodes")

    def _inputs(self) -> None:
        from .import_layout import read_inputs

        read_inputs(self)

    def _node(self, index: int, node) -> Row:
        if index in self.absorbed:
            op_type, _ = self.absorbed[index]
            return self._row(index, op_type, "mapped", None, "")
        upstream = [name for name in node.input if name in self.failed]
        if upstream and not self._has_rule(node):  # named, whatever its inputs
            upstream = [name for name in upstream if name in self.ghosts]
        if upstream and not all(name in self.ghosts for name in upstream):
            self._fail(node)
            return self._row(index, None, "skipped", None, "")
        try:
            made = self._map(index, node)
        except ImportRejection as rejection:
            self._fail(node)
            error = self._error(index, rejection)
            if self.strict:
                raise error from None
            return self._row(index, None, IMPORT_STATUS[rejection.code], rejection.code,
                             str(error), rejection.hint, error)
        if upstream:  # judged on the shapes its failed inputs would have had: not imported
            made_tensors = [n for n in node.output if isinstance(self.values.get(n), Tensor)]
            self.failed.update(made_tensors)
            self.ghosts.update(made_tensors)
            if made_tensors:
                return self._row(index, None, "skipped", None, "")
        return self._row(index, made, "lifted" if made == "" else "mapped", None, "")

    def _has_rule(self, node) -> bool:
        from .import_rules import IMPORT_RULES
        from .import_static import STATIC_RULES

        return node.domain in ("", "ai.onnx") and (
            node.op_type in IMPORT_RULES or node.op_type in STATIC_RULES or
            node.op_type in ("Constant", "Shape"))

    def _map(self, index: int, node) -> str:
        """Map one node: "" when folded into a fixed value, else the op_type its row shows."""
        from .import_rules import IMPORT_RULES

        if node.domain not in ("", "ai.onnx"):
            raise ImportRejection("onnx-domain", f"op {node.op_type} of domain "
                                  f"{node.domain!r}", "only ONNX's own ops are imported")
        if node.op_type in ("Add", "Sub", "Mul", "Div") and any(
                a.name == "broadcast" and a.i for a in node.attribute):
            raise ImportRejection("onnx-attribute", f"{node.op_type} with the opset 1-6 "
                                  "`broadcast` attribute aligns its operand from `axis`, not "
                                  "numpy's way", "convert the file to opset 7 or later")
        try:
            onnx.checker.check_node(node, self.checker)
        except Exception as exc:  # noqa: BLE001 - onnx's ValidationError and kin
            if not onnx.defs.has(node.op_type):
                raise ImportRejection("onnx-unsupported-op", f"{node.op_type} is not an ONNX "
                                      "op") from None
            raise ImportRejection("onnx-malformed", "the node does not follow its op's "
                                  f"schema: {str(exc).strip().splitlines()[0][:200]}",
                                  "re-export the network") from None
        try:
            made = self._fixed(node) if self._all_fixed(node) else None
            if made is not None:
                return made
            rule = IMPORT_RULES.get(node.op_type)
            if rule is None:
                raise ImportRejection("onnx-unsupported-op", f"{node.op_type} is not "
                                      "piecewise linear, or has no canonical operator",
                                      "cut the network before it, or replace it in the "
                                      "model before export")
            return rule(self, index, node)
        except ImportRejection:
            raise
        except (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError,
                OverflowError, AssertionError) as exc:  # a node the schema check let by
            raise ImportRejection("onnx-malformed", "the node's attributes or fixed operands "
                                  f"cannot be read as {node.op_type} defines them "
                                  f"({type(exc).__name__}: {str(exc)[:160]})",
                                  "re-export the network") from None

    def _fail(self, node) -> None:
        """The node's outputs are not imported; in a diagnosis each keeps a stand-in of its
        shape where one is known (`import_diagnosis`), so the nodes after it are still
        judged, and every node outside the boundary is named at once."""
        from .import_diagnosis import stand_in

        self.failed.update(node.output)
        for name in node.output:
            ghost = None if self.strict else stand_in(self, node, name)
            if ghost is not None:
                self.values[name] = ghost
                self.ghosts.add(name)
            else:
                self.values.pop(name, None)

    def _all_fixed(self, node) -> bool:
        if node.op_type == "Constant":
            return True
        if node.op_type == "Shape":
            return isinstance(self.values.get(node.input[0]), (Tensor, np.ndarray))
        given = [n for n in node.input if n]
        return bool(given) and all(isinstance(self.values.get(n), np.ndarray) for n in given)

    def _fixed(self, node) -> str | None:
        """Fold a node of fixed inputs (""), or None when a rule must take it (a Dropout's
        ratio is fixed, but its data is not)."""

        if node.op_type == "Constant":
            self.values[node.output[0]] = _constant_value(node)
            return ""
        if node.op_type == "Shape":
            self.values[node.output[0]] = self._shape_of(node)
            return ""
        inputs = [self.values[n] if n else None for n in node.input]
        self.values[node.output[0]] = np.asarray(fold(node, inputs))
        return ""

    def _shape_of(self, node) -> np.ndarray:
        from .import_static import attribute

        value = self.values[node.input[0]]
        full = list(value.shape) if isinstance(value, np.ndarray) else \
            ([BATCH if self.batch == "symbolic" else 1] if self.offset else []) + \
            list(value.shape)
        start, end = int(attribute(node, "start", 0)), attribute(node, "end")
        return np.asarray(full[start:None if end is None else int(end)], np.int64)

    def _error(self, index: int, rejection: ImportRejection) -> ONNXImportError:
        node = self.graph.node[index]
        return ONNXImportError(rejection.code, rejection.reason, node=self.node_name(index),
                               fx_op="onnx", spelling=node.op_type, hint=rejection.hint,
                               location=f"{self.label} node {index}")

    def _row(self, index: int, op_type, status: str, code, message: str, hint: str = "",
             error=None) -> Row:
        node = self.graph.node[index]
        value = self.values.get(node.output[0]) if node.output else None
        shape = value.shape if isinstance(value, Tensor) and \
            node.output[0] not in self.failed else None
        return Row(self.source((index,)), op_type or None, status, code, message, hint, shape,
                   error)

    def _finish(self) -> GraphIR | None:
        from .import_layout import output_node

        if any(r.status in ("unsupported", "boundary", "skipped") for r in
               (*self.input_rows, *self.rows)):
            return None
        try:
            if not self.graph.output:
                raise ImportRejection("onnx-output", "the graph has no outputs")
            output = output_node(self)
            if self.output_name and self.output_name not in \
                    {n.name for n in self.nodes} | set(self.values):
                output = IRNode(self.output_name, "Output", output.inputs, output.attrs, None,
                                "", Source(self.output_name, "onnx", "graph outputs", "", "",
                                           f"{self.label} outputs"))
            self.nodes.append(output)
        except ImportRejection as rejection:
            error = ONNXImportError(rejection.code, rejection.reason, node="output",
                                    fx_op="onnx", spelling="graph output", hint=rejection.hint,
                                    location=f"{self.label} outputs")
            if self.strict:
                raise error from None
            self.input_rows.append(Row(error.source, None, IMPORT_STATUS[rejection.code],
                                       rejection.code, str(error), rejection.hint, None, error))
            return None
        used = {c for n in self.nodes for k in CONSTANT_ATTRS[n.op_type]
                for c in [n.attrs.get(k)] if c}
        constants = {k: v for k, v in self.constants.items() if k in used}
        return GraphIR(tuple(self.nodes), constants)


_CONSTANT_FORMS = {"value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}
"""A Constant's scalar and list forms (opset 12 and later), by the dtype ONNX gives them."""


def _constant_value(node) -> np.ndarray:
    """The value of a Constant node: its `value` tensor, or a scalar or list form."""
    from .import_static import attribute

    if len(node.attribute) != 1:
        raise ImportRejection("onnx-malformed", "a Constant with other than one value")
    form = node.attribute[0].name
    if form == "value":
        return np.asarray(attribute(node, "value"))
    if form in _CONSTANT_FORMS:
        return np.asarray(attribute(node, form), dtype=_CONSTANT_FORMS[form])
    raise ImportRejection("onnx-static-computation", f"a Constant's {form}: only tensors and "
                          "numbers are imported", "write the constant as a dense tensor")


def _label(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.path.basename(os.fspath(source))
    return "<model>"


def import_model(source, *, strict: bool) -> tuple[ConversionReport, onnx.ModelProto, str]:
    """Read `source` (a path, bytes or a ModelProto) and import it: the report, the model
    as read, and how its first axis was read (a key of `BATCH_MODES`)."""
    model = read_model(source, "from_onnx", accept_bytes=True, weights_as_inputs=True)
    importer = Importer(model, _label(source), strict)
    return importer.run(), model, importer.batch


@from_caller
def from_onnx(source) -> GraphIR:
    """Read an ONNX file into GraphIR; see `ncet.from_onnx`."""
    report, _, _ = import_model(source, strict=True)
    if report.graph is None:  # a problem without a row of its own: say the first
        report.raise_first()
    return report.graph


@from_caller
def diagnose_onnx(source) -> ConversionReport:
    """Every ONNX node's outcome at once; see `ncet.diagnose_onnx`."""
    report, _, _ = import_model(source, strict=False)
    return report


def batch_note(mode: str, dims: list) -> str:
    """The report's sentence on how the first axis is read."""
    shown = ", ".join("x".join(str(d) for d in shape) for shape in dims)
    return BATCH_MODES[mode].format(dims=shown)


