"""Model targets: load the model a command names, from a module, a file or the bundled examples."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ..examples import EXAMPLES, load_example

FORMS_HELP = (
    "TARGET is package.module:factory (importable from the current directory), "
    "path/to/file.py:factory, or a bundled example name "
    f"({', '.join(EXAMPLES)}). The factory is a function or an nn.Module class called with "
    "no arguments, or an nn.Module instance.")


class TargetError(Exception):
    """TARGET does not name a model that can be loaded; the message says why and what to type."""


@dataclass(frozen=True)
class Target:
    """A loaded model and what the user typed to name it.

    Attributes:
        text: TARGET as given.
        model: The model, in eval mode only when the user asked for it or the example is.
        input_shapes: Per-sample input shapes: those given, else a bundled example's own.
    """

    text: str
    model: nn.Module
    input_shapes: tuple[tuple[int, ...], ...]


def load_target(text: str, input_shapes: tuple[tuple[int, ...], ...] = (),
                eval_mode: bool = False) -> Target:
    """`_load_target`, with a TARGET that exits (sys.exit while importing or building the
    model) reported as the usage error it is, never as the command's own exit status."""
    try:
        return _load_target(text, input_shapes, eval_mode)
    except SystemExit as exit_:
        raise TargetError(f"TARGET {text!r} called sys.exit({exit_.code!r}) while it was "
                          "loaded: guard the module's script code with `if __name__ == "
                          "'__main__':`, or point TARGET at a function that only builds the "
                          "model") from None


def _load_target(text: str, input_shapes: tuple[tuple[int, ...], ...] = (),
                 eval_mode: bool = False) -> Target:
    """Load the model `text` names; put it in eval mode only when `eval_mode` is set.

    Args:
        text: `package.module:factory`, `path/to/file.py:factory` or a bundled example name.
        input_shapes: Per-sample input shapes; required unless `text` is an example.
        eval_mode: Call `model.eval()` after loading.

    Returns:
        The Target.

    Raises:
        TargetError: The target is malformed, cannot be imported, is not a model, or has
            no input shapes.
    """
    module_name, _, attribute = text.rpartition(":")
    if not module_name:
        model, example_shapes = _example(text)
        input_shapes = input_shapes or example_shapes
    else:
        if not attribute:
            raise TargetError(f"TARGET {text!r} names no factory after the colon: type "
                              f"the function or class that builds the model, e.g. "
                              f"{module_name}:Net")
        module = _import(module_name, text)
        model = _build(_attribute(module, attribute, text), text)
    if not input_shapes:
        raise TargetError(f"TARGET {text!r} needs its per-sample input shapes: give one "
                          "--input-shape per forward() argument, without the batch axis, e.g. "
                          "--input-shape 3,32,32")
    if eval_mode:
        model.eval()
    return Target(text, model, tuple(input_shapes))


def _example(name: str) -> tuple[nn.Module, tuple[tuple[int, ...], ...]]:
    if name not in EXAMPLES:
        raise TargetError(f"TARGET {name!r} is neither package.module:factory, "
                          "path/to/file.py:factory nor a bundled example "
                          f"({', '.join(EXAMPLES)})")
    return load_example(name)


def _import(module_name: str, text: str):
    is_file = module_name.endswith(".py") or os.sep in module_name or "/" in module_name
    try:
        if is_file:
            return _import_file(Path(module_name), text)
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does
        return importlib.import_module(module_name)
    except TargetError:
        raise
    except Exception as error:  # the user's module may raise anything while importing
        what = "file" if is_file else "module"
        advice = "" if is_file else (". Run ncet from the folder that holds it, install it, "
                                     "or name a file instead: path/to/file.py:factory")
        raise TargetError(f"cannot import {what} {module_name!r} for TARGET {text!r}: "
                          f"{_describe(error)}{advice}") from error


def _import_file(path: Path, text: str):
    if not path.is_file():
        raise TargetError(f"TARGET {text!r}: there is no file {str(path)!r}")
    name = "_ncet_target_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"TARGET {text!r}: {str(path)!r} is not a Python file. {FORMS_HELP}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # sibling imports work, as for a script
    spec.loader.exec_module(module)
    return module


def _attribute(module, attribute: str, text: str):
    value = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            names = sorted(n for n, v in vars(module).items() if _is_model_factory(v, module))
            known = f"; it has {', '.join(names)}" if names else ""
            raise TargetError(f"TARGET {text!r}: {module.__name__!r} has no attribute "
                              f"{attribute!r}{known}")
        value = getattr(value, part)
    return value


def _is_model_factory(value, module) -> bool:
    """A model, a model class or a public function defined in `module` itself."""
    if isinstance(value, nn.Module):
        return True
    if getattr(value, "__module__", None) != module.__name__:
        return False
    return (inspect.isclass(value) and issubclass(value, nn.Module)) or (
        inspect.isfunction(value) and not value.__name__.startswith("_"))


def _build(factory, text: str) -> nn.Module:
    if isinstance(factory, nn.Module):
        return factory
    if not callable(factory):
        raise TargetError(f"TARGET {text!r} is an object of type {type(factory).__name__}, "
                          "not an nn.Module, an nn.Module class or a function returning one")
    try:
        model = factory()
    except Exception as error:  # the user's factory may raise anything
        raise TargetError(f"calling TARGET {text!r} with no arguments failed: "
                          f"{_describe(error)}. Point TARGET at a function that builds the "
                          "model without arguments") from error
    if not isinstance(model, nn.Module):
        raise TargetError(f"TARGET {text!r} returned an object of type "
                          f"{type(model).__name__}, not an nn.Module")
    return model


def _describe(error: BaseException) -> str:
    """The exception in one line, with the innermost source line when it has one."""
    text = f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename and "/ncet/" not in f.filename]
    if user and not isinstance(error, (SyntaxError, ModuleNotFoundError)):
        text += f" (at {Path(user[-1].filename).name}:{user[-1].lineno})"
    return text
