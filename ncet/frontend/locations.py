"""Where code lives: the user's lines as messages quote them (`model.py:12`, `In [3], line
12` in a notebook), the line a failed trace stopped at, and which callables are PyTorch's
or Python's own rather than the user's."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import types

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRONTEND_DIR = os.path.dirname(__file__) + os.sep
_NCET_MACHINERY = tuple(_FRONTEND_DIR + f for f in (
    "trace.py", "trace_patches.py", "canonicalize.py", "conversion.py"))
"""NCET's own frames between the user's code and torch.fx while a model is traced."""


SOURCE_TEXT_CHARS = 80
"""Longer source lines are cut to this many characters, ending in an ellipsis."""


def source_text(filename: str, line: int) -> str:
    """The stripped text of a line of code, "" when Python cannot read it (code given to
    `exec`, a file since deleted); notebook cells are readable, IPython registers them."""
    text = linecache.getline(filename, line).strip()
    return text if len(text) <= SOURCE_TEXT_CHARS else text[:SOURCE_TEXT_CHARS - 1] + "…"


_LIBRARY_DIRS = tuple(sorted({os.path.join(p, "") for k, p in sysconfig.get_paths().items()
                              if k in ("stdlib", "platstdlib", "purelib", "platlib")}))
"""The standard library and installed packages: a trace that fails inside them (json.dumps of
a traced value, say) is reported at the user's line that called them."""


def failure_location(exc: BaseException, *, own_only: bool = False) -> tuple[str, str]:
    """The location (as `located` writes it) and text of the line FX could not trace: the
    innermost frame of the user's code in the traceback of an exception raised while
    tracing, preferring code outside the standard library and installed packages (or, if
    `own_only`, only such code); ("", "") if there is none."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        name = user_file(code.co_filename)
        if name is not None:
            frames.append((code.co_filename, name, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return "", ""
    own = [f for f in frames if not f[0].startswith(_LIBRARY_DIRS)]
    if own_only and not own:
        return "", ""
    filename, name, line = (own or frames)[-1]
    linecache.checkcache(filename)
    return located(name, line), source_text(filename, line)


_STDLIB_DIR = os.path.join(sysconfig.get_paths()["stdlib"], "")
_LIBRARY_MODULES = frozenset({"torch", "_operator", "operator", "math", "builtins"})
_LIBRARY_OP_NAMESPACES = frozenset({"aten", "prims", "quantized", "_quantized"})
_BUILTIN_TYPES = (types.BuiltinFunctionType, types.MethodDescriptorType,
                  types.WrapperDescriptorType, types.MethodWrapperType)


def is_library_function(target: object) -> bool:
    """True for PyTorch's and Python's own callables (torch.*, F.*, Tensor methods, aten
    ops, operator, math, builtins); False for anything else a graph may call: a function of
    the user's own recorded by `torch.fx.wrap`, a decorated or partial function, a custom
    op. Decided by where the code lives, not by `__module__`, which a wrapper copies."""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace in _LIBRARY_OP_NAMESPACES
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.partition("::")[0] in _LIBRARY_OP_NAMESPACES
    if isinstance(target, types.FunctionType):
        return target.__code__.co_filename.startswith((_TORCH_DIR, _STDLIB_DIR))
    if isinstance(target, _BUILTIN_TYPES):
        module = getattr(target, "__module__", None) \
            or getattr(getattr(target, "__objclass__", None), "__module__", None) or ""
        return module.partition(".")[0] in _LIBRARY_MODULES
    return False


def located(place: str, line: int) -> str:
    """A source location as tables, messages and reports show it: `model.py:12` for a file,
    `In [3], line 12` for a notebook cell (as IPython's own tracebacks name cells)."""
    return f"{place}, line {line}" if place.startswith("In [") else f"{place}:{line}"


def user_file(filename: str) -> str | None:
    """Where `filename` is in the user's code: `In [n]` for the code of an IPython cell (its
    execution count), the file's basename otherwise; None for torch and NCET machinery."""
    if filename.startswith((_TORCH_DIR, *_NCET_MACHINERY)) or "<eval_with" in filename:
        return None
    count = _cell_execution_count(filename)
    return os.path.basename(filename) if count is None else f"In [{count}]"


def _cell_execution_count(filename: str) -> int | None:
    """The execution count of the IPython cell whose code was compiled as `filename`, from
    IPython's registry of cells (its compiler's file-name map), or None when `filename` is
    not a cell. IPython is consulted only when it is already running: never imported here."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    cells = getattr(getattr(shell, "compile", None), "_filename_map", None)
    count = cells.get(filename) if isinstance(cells, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None
