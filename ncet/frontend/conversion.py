"""The entry points `convert` and `diagnose`."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import TraceError, from_caller
from ..ir import GraphIR
from .canonicalize import canonicalize, trace_failure_report
from .isolation import untouched
from .report import ConversionReport


def _check_shapes(input_shapes) -> tuple[tuple[int, ...], ...]:
    """Validate the shapes themselves; their number is checked against forward() by tracing
    (TraceError "input-count")."""
    checked = []
    for shape in input_shapes:
        if isinstance(shape, int):
            shape = (shape,)
        if hasattr(shape, "shape") and not isinstance(shape, (tuple, list, torch.Size)):
            kind = "Tensor" if isinstance(shape, torch.Tensor) else \
                f"{type(shape).__module__.partition('.')[0]}.{type(shape).__name__}"
            raise ValueError(f"a per-sample input shape must be a tuple of positive ints, got a "
                             f"{kind} of shape {list(shape.shape)}; pass its shape without the "
                             "batch axis, e.g. tuple(x.shape[1:])")
        if not isinstance(shape, (tuple, list, torch.Size)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**63 for d in shape):
            raise ValueError(f"a per-sample input shape must be a tuple of positive ints "
                             f"below 2**63 (without the batch axis), got {shape!r:.200}")
        checked.append(tuple(shape))
    return tuple(checked)


def _check_dtype(dtype) -> torch.dtype:
    """A dtype example inputs can be made of. Not only floating point: integer inputs give
    graphs whose nodes the `dtype` rule then rejects, one by one, as diagnose shows."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype such as torch.float32, not "
                        f"{type(dtype).__name__} {dtype!r:.60}")
    try:
        torch.zeros(1).to(dtype)
    except (RuntimeError, TypeError):
        raise ValueError(f"dtype={dtype}: example inputs cannot be made of it; give "
                         "torch.float32 (the default) or another floating-point dtype") from None
    return dtype


def _check_rewrite(rewrite, name: str = "rewrite") -> bool:
    if not isinstance(rewrite, bool):
        raise TypeError(f"{name} must be True or False, not {type(rewrite).__name__}")
    return rewrite


def _check_stop_at(stop_at) -> str | None:
    if stop_at is not None and not isinstance(stop_at, str):
        raise TypeError(f"stop_at must be a node name (str) or None, not "
                        f"{type(stop_at).__name__}")
    return stop_at


@from_caller
def convert(model: nn.Module, *input_shapes, dtype: torch.dtype = torch.float32,
            rewrite: bool = False, stop_at: str | None = None,
            cut_trailing: bool = False) -> GraphIR:
    """Trace `model` and project it onto canonical GraphIR.

    Args:
        model: The PyTorch model; it is never modified, and its hooks do not run (they are
            not part of the graph). Put it in eval mode first if it has dropout or
            BatchNorm.
        *input_shapes: One per-sample shape (no batch axis) per forward() argument.
        dtype: The dtype of the example inputs used for shape propagation.
        rewrite: Apply the opt-in rewrite rules (docs/support-boundary.md, "Opt-in
            rewrites") to NCET's copy of the traced graph first: in-place forms become
            out-of-place where nothing can observe the overwrite, and `x.view(x.size(0), -1)`
            and its kin become static reshapes. Off by default: those spellings are then
            rejected, as the spec says, with a hint naming `rewrite=True` where it applies.
        stop_at: Convert only up to this node: an FX node name as `diagnose` shows it
            (`Row.fx_name`, e.g. "fc1" or "relu_2") or the module path of a call_module
            node. The GraphIR returns that node's value alone; the nodes it does not need
            are left out (`diagnose` shows them as rows of status "cut").
        cut_trailing: Leave out the monotone activations that end every path to the output
            (Sigmoid, Tanh, Softmax, LogSoftmax in any spelling; docs/ir.md, "Cutting a
            model short"), so that the GraphIR returns the logits; an activation with
            another use, e.g. a Softmax followed by a Linear, is not cut. `check_exactness`
            then compares the GraphIR's outputs with the model's own values at the cut.

    Returns:
        The GraphIR, with every fixed tensor lifted into `constants`.

    Raises:
        TraceError: FX cannot trace the model, or it fails on the example inputs, or
            `stop_at` names no operation of it (reason code "stop-at-node").
        UnsupportedOperatorError: The first spelling outside the spec's tables.
        SupportBoundaryError: The first recognised spelling outside the support boundary.
        ValueError: The input shapes are malformed, or no tensor can be of `dtype`.
        TypeError: `dtype` is not a torch.dtype, `rewrite` or `cut_trailing` is not a bool,
            or `stop_at` is not a str.

    Safe to call from several threads: `convert`, `diagnose` and `check_exactness` run one
    at a time, and other threads' eager calls are never disturbed (docs/reliability.md).
    Its errors are raised from the caller's frame, without NCET's own frames before the
    message; NCET_DEBUG=1 keeps them (`ncet.errors.from_caller`).

    Example:
        >>> ir = ncet.convert(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (4,))
    """
    shapes, dtype = _check_shapes(input_shapes), _check_dtype(dtype)
    with untouched(model):
        report = canonicalize(model, shapes, dtype, first_error_only=True,
                              rewrite=_check_rewrite(rewrite), stop_at=_check_stop_at(stop_at),
                              cut_trailing=_check_rewrite(cut_trailing, "cut_trailing"))
    assert report.graph is not None
    return report.graph


@from_caller
def diagnose(model: nn.Module, *input_shapes, dtype: torch.dtype = torch.float32,
             rewrite: bool = False, stop_at: str | None = None,
             cut_trailing: bool = False) -> ConversionReport:
    """Report what NCET makes of every FX node, with every problem of the model at once.

    Never raises for problems of the model: they become rows with a status, a stable reason
    code, a message and a hint.

    Args:
        model: The PyTorch model; it is never modified, and its hooks do not run.
        *input_shapes: One per-sample shape (no batch axis) per forward() argument.
        dtype: The dtype of the example inputs used for shape propagation.
        rewrite: As for `convert`; each rewritten node's row names its rule (`Row.rewrite`).
        stop_at, cut_trailing: As for `convert`; each node left out has a row of status
            "cut" saying why (`ConversionReport.cut`). A `stop_at` that names no operation
            gives a report with a single row of code "stop-at-node".

    Returns:
        A ConversionReport; `.graph` holds the GraphIR when `.ok`.

    Raises:
        ValueError: The input shapes are malformed, or no tensor can be of `dtype`.
        TypeError: `dtype` is not a torch.dtype, `rewrite` or `cut_trailing` is not a bool,
            or `stop_at` is not a str.
    """
    shapes, dtype = _check_shapes(input_shapes), _check_dtype(dtype)
    options = dict(rewrite=_check_rewrite(rewrite), stop_at=_check_stop_at(stop_at),
                   cut_trailing=_check_rewrite(cut_trailing, "cut_trailing"))
    try:
        with untouched(model):
            return canonicalize(model, shapes, dtype, first_error_only=False, **options)
    except TraceError as error:
        return trace_failure_report(error)
