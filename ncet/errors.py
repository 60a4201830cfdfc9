"""The error hierarchy and the stable reason codes that NCET reports."""

from __future__ import annotations

import contextvars
import functools
import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from .ir import Source


@dataclass(frozen=True, slots=True)
class Reason:
    """One stable reason code: the error class it raises, its status and a summary."""

    code: str
    error: str  # "UnsupportedOperatorError", "SupportBoundaryError" or "TraceError"
    summary: str


_REASON_ROWS = (
    # Tracing and shape propagation.
    ("trace-failed", "TraceError", "torch.fx.symbolic_trace could not trace the model"),
    ("input-count", "TraceError", "the number of input shapes differs from forward()'s arguments"),
    ("shape-propagation", "TraceError", "running the traced graph on the example inputs failed"),
    ("stop-at-node", "TraceError",
     "stop_at names no operation of the traced graph (an unknown name, an input, a parameter)"),
    ("batch-not-preserved", "SupportBoundaryError",
     "a node's leading size does not follow the batch size, or its per-sample shape changes "
     "with it"),
    ("output-structure", "SupportBoundaryError",
     "forward() returns something other than a tensor or a flat tuple/list of graph tensors"),
    # Spelling recognition (spec sections 2-4, 7).
    ("unsupported-module", "UnsupportedOperatorError",
     "the module type is not in the spelling table"),
    ("unsupported-function", "UnsupportedOperatorError",
     "the function is not in the spelling table"),
    ("unsupported-method", "UnsupportedOperatorError",
     "the tensor method is not in the spelling table"),
    ("not-a-tensor-method", "UnsupportedOperatorError",
     "a method tensors do not have, called on a traced tensor"),
    ("inplace", "UnsupportedOperatorError", "in-place forms are rejected before normalization"),
    ("dropout-training", "UnsupportedOperatorError", "stochastic training-mode dropout"),
    ("batch-norm-function", "UnsupportedOperatorError", "F.batch_norm is not mapped"),
    # Arguments.
    ("unsupported-argument", "SupportBoundaryError",
     "an argument the spelling's handler does not honour"),
    ("out-argument", "SupportBoundaryError", "caller-provided out= storage"),
    ("dynamic-argument", "SupportBoundaryError",
     "an argument that must be static is a traced value"),
    ("constant-computation", "SupportBoundaryError", "an operation computes on fixed tensors only"),
    ("constant-not-finite", "SupportBoundaryError", "a lifted constant holds NaN or infinity"),
    ("constant-device", "SupportBoundaryError",
     "a fixed tensor without values on the CPU (meta, another device, or not strided)"),
    ("rank", "SupportBoundaryError", "the input's rank is outside what the operator accepts"),
    ("dtype", "SupportBoundaryError", "a tensor is not of a floating-point dtype"),
    # Batch axis rules.
    ("batch-axis", "SupportBoundaryError",
     "the operation reads, moves, merges or removes the batch axis"),
    ("broadcast-batch-axis", "SupportBoundaryError",
     "graph tensors of different ranks would broadcast across the batch axis"),
    ("squeeze-without-dim", "SupportBoundaryError", "squeeze without explicit static dimensions"),
    ("mean-without-dim", "SupportBoundaryError", "mean without explicit static dimensions"),
    ("mean-dtype", "SupportBoundaryError", "mean with a dtype conversion"),
    # ElementwiseAffine and Add/Sub.
    ("affine-tensor-tensor", "SupportBoundaryError",
     "multiplication or division of two graph tensors"),
    ("affine-constant-over-tensor", "SupportBoundaryError", "a constant divided by a graph tensor"),
    ("affine-zero-divisor", "SupportBoundaryError",
     "division by a constant that is zero somewhere"),
    ("affine-rounding-mode", "SupportBoundaryError", "division with a rounding mode"),
    ("affine-broadcast", "SupportBoundaryError",
     "the constant would change the graph tensor's shape by broadcasting"),
    ("affine-constant-type", "SupportBoundaryError",
     "the constant is not a real number or real tensor"),
    ("alpha", "SupportBoundaryError", "alpha is not a finite static real number"),
    # Parameterised operators.
    ("runtime-weight", "SupportBoundaryError",
     "F.linear/F.conv2d weight or bias is not fixed get_attr state"),
    ("batch-norm-training", "SupportBoundaryError",
     "BatchNorm in training mode normalises with batch statistics"),
    ("batch-norm-no-running-stats", "SupportBoundaryError", "BatchNorm without running statistics"),
    ("batch-norm-negative-var", "SupportBoundaryError", "BatchNorm running_var below zero"),
    ("constant-subnormal", "SupportBoundaryError",
     "a divisor (or BatchNorm's var + eps) that is subnormal in the node's dtype"),
    ("leaky-relu-slope", "SupportBoundaryError",
     "LeakyReLU negative_slope outside [0, 1] or not finite"),
    ("pool-return-indices", "SupportBoundaryError", "max pooling that returns indices"),
    ("weight-hook", "SupportBoundaryError",
     "a weight that a forward pre-hook recomputes (old-style weight_norm, spectral_norm, "
     "prune)"),
    ("concat-constant", "SupportBoundaryError", "a fixed tensor concatenated with graph tensors"),
    ("advanced-indexing", "SupportBoundaryError", "indexing with tensors, lists or booleans"),
    ("getitem-non-tensor", "SupportBoundaryError", "indexing something that is not a graph tensor"),
)

REASONS: dict[str, Reason] = {row[0]: Reason(*row) for row in _REASON_ROWS}
"""Every reason code NCET can report, keyed by code."""


class NCETError(Exception):
    """Base class of every error NCET raises on purpose.

    A public entry point (`convert`, `diagnose`, `ConversionReport.raise_first`, ...) raises
    it from the caller's frame: its `__traceback__` starts at the line that called NCET and
    holds no frame of NCET's own, and its chained cause is not printed (`from_caller`).
    What was taken off is kept for a bug report, and `debug_traceback()` prints it all;
    with the environment variable NCET_DEBUG=1 nothing is taken off.

    Attributes:
        internal_traceback: The frames inside NCET the error was raised through (None when
            none were taken off).
        internal_cause: The `__cause__` taken off with them, e.g. the exception torch.fx
            raised while tracing (None for none).
    """

    internal_traceback: TracebackType | None = None
    internal_cause: BaseException | None = None

    def debug_traceback(self) -> str:
        """The whole traceback as Python would print it without `from_caller`: the chained
        cause, then the caller's frames followed by NCET's own, then the message."""
        parts = []
        cause = self.internal_cause or self.__cause__
        if cause is not None:
            parts += traceback.format_exception(cause)
            parts.append("\nThe above exception was the direct cause of the following "
                         "exception:\n\n")
        frames = traceback.extract_tb(self.__traceback__) + \
            traceback.extract_tb(self.internal_traceback)
        if frames:
            parts += ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
        message = [line for line in traceback.format_exception_only(self)
                   if line.rstrip("\n") != HIDDEN_NOTE]  # nothing is hidden here
        return "".join(parts + message)

    def __reduce__(self):
        """Pickle the class, the message and the attributes without calling `__init__` again
        (subclasses take other arguments than the message); tracebacks do not pickle, so the
        debugging state stays behind."""
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("internal_traceback", "internal_cause")}
        return _rebuilt, (type(self), self.args, state)


def _rebuilt(cls: type, args: tuple, state: dict) -> NCETError:
    """An NCETError of class `cls` unpickled: its message and attributes as they were."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConversionError(NCETError):
    """A model could not be converted to GraphIR.

    Attributes:
        node: The FX node name the problem sits at ("" when no node is involved).
        spelling: The spelling NCET saw, e.g. "F.relu" or "nn.Conv2d".
        code: A stable kebab-case reason code, one of `REASONS`.
        hint: What to do about it.
        location: "file:line" where FX recorded the node; for a module call FX recorded no
            line for (a child of an nn.Sequential), the module as an expression from the
            model, e.g. "model.features[3]"; or "".
        source_text: The text of that line of code, or "" when Python cannot read it.
        reason: The problem in a few words.
    """

    reasons: Mapping[str, Reason] = REASONS
    """The reason codes this class reports (an ONNX import's are its own)."""

    def __init__(self, code: str, reason: str, *, node: str = "", fx_op: str = "",
                 spelling: str = "", hint: str = "", location: str = "",
                 source_text: str = ""):
        assert code in self.reasons, f"unregistered reason code {code!r}"
        self.code = code
        self.reason = reason
        self.node = node
        self.fx_op = fx_op
        self.spelling = spelling
        self.hint = hint
        self.location = location
        self.source_text = source_text
        super().__init__(format_message(code, reason, node, fx_op, spelling, hint, location,
                                        source_text))

    @property
    def source(self) -> Source:
        """The provenance record of the node the problem sits at (as Row and IRNode carry
        it; the module is not part of an error)."""
        return Source(self.node, self.fx_op, self.spelling, "", "", self.location)


class TraceError(ConversionError):
    """torch.fx could not trace the model, or the traced graph failed on the example inputs."""


class UnsupportedOperatorError(ConversionError):
    """A spelling is not in the spec's tables, or is a form the spec rejects outright."""


class SupportBoundaryError(ConversionError):
    """A recognised spelling whose parameters, ranks, constants or batch use are outside."""


class Rejection(Exception):
    """Internal: a handler's verdict on one node, turned into a ConversionError with context."""

    def __init__(self, code: str, reason: str, hint: str = ""):
        assert code in REASONS, f"unregistered reason code {code!r}"
        super().__init__(reason)
        self.code, self.reason, self.hint = code, reason, hint


class GraphIRFormatError(NCETError):
    """A GraphIR file is malformed, truncated, of another version, or hostile."""


ERROR_CLASSES: dict[str, type[ConversionError]] = {
    "TraceError": TraceError,
    "UnsupportedOperatorError": UnsupportedOperatorError,
    "SupportBoundaryError": SupportBoundaryError,
}


def quote_source(location: str, source_text: str) -> str:
    """A location as messages show it: file:line `text`, or file:line alone without the text."""
    return f"{location} `{source_text}`" if location and source_text else location


def format_message(code: str, reason: str, node: str, fx_op: str, spelling: str,
                   hint: str, location: str, source_text: str = "") -> str:
    """Render one error as the one sentence users read, e.g. "node 'sin' (call_function
    torch.sin, model.py:12 `y = torch.sin(x)`): function torch.sin is not in the spelling
    table [unsupported-function]. See docs/support-boundary.md ..."."""
    where = ", ".join(part for part in (f"{fx_op} {spelling}".strip(),
                                        quote_source(location, source_text)) if part)
    head = f"node {node!r}" if node else "model"
    if where:
        head += f" ({where})"
    text = f"{head}: {reason.rstrip('.')} [{code}]."
    if hint:
        text += f" {hint[:1].upper()}{hint[1:].rstrip('.')}."
    return text


def make_error(code: str, reason: str, **context: str) -> ConversionError:
    """Build the error of the class registered for `code`."""
    return ERROR_CLASSES[REASONS[code].error](code, reason, **context)


DEBUG_VARIABLE = "NCET_DEBUG"
"""The environment variable that, set to anything but "" or "0", keeps NCET's own frames and
the chained cause on the errors public entry points raise (`from_caller`)."""

_ENTERED: contextvars.ContextVar[int] = contextvars.ContextVar("ncet_entered", default=0)
"""How many public entry points are running in this thread (or task): only the outermost
takes NCET's frames off, so an entry point calling another keeps the whole story."""

_F = TypeVar("_F", bound=Callable)


def from_caller(function: _F) -> _F:
    """Make `function` a public entry point whose NCETErrors are raised from the caller's
    frame: the traceback a user sees is their own code, then the message.

    The error leaves with the same class, message and attributes; its `__traceback__` (the
    frames inside NCET) moves to `internal_traceback` and its `__cause__` to
    `internal_cause`, and `__suppress_context__` is set (`__context__` stays). The wrapper
    re-raises with a bare `raise`, which adds no frame of its own (Python 3.11+ re-raises
    with the exception's `__traceback__` as it is), so no frame of NCET's precedes the
    message. Other exceptions (ValueError for a malformed argument, a bug's KeyError) keep
    their whole traceback, and with NCET_DEBUG=1 so do NCETErrors.

    Example:
        >>> @from_caller
        ... def convert(model, *input_shapes): ...
    """
    @functools.wraps(function)
    def entry_point(*args, **kwargs):
        token = _ENTERED.set(_ENTERED.get() + 1)
        try:
            return function(*args, **kwargs)
        except NCETError as error:
            if _ENTERED.get() == 1 and os.environ.get(DEBUG_VARIABLE, "") in ("", "0"):
                _detach(error)
            raise  # bare: adds no frame of this wrapper to the traceback
        finally:
            _ENTERED.reset(token)

    return entry_point  # type: ignore[return-value]


HIDDEN_NOTE = ("(NCET's own frames and the error's cause are hidden: NCET_DEBUG=1 shows "
               "them, as does error.debug_traceback())")
"""The line under a detached error's message, saying where the rest is."""


def _detach(error: NCETError) -> None:
    """Take NCET's frames and the chained cause off `error`, keeping them on it."""
    if error.internal_traceback is None:  # re-raised (raise_first twice): keep the first
        error.internal_traceback = error.__traceback__
    if error.__cause__ is not None:
        error.internal_cause = error.__cause__
    error.__traceback__ = None
    error.__cause__ = None
    error.__suppress_context__ = True
    if HIDDEN_NOTE not in getattr(error, "__notes__", ()):
        error.add_note(HIDDEN_NOTE)
