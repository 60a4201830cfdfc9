"""Model targets: load the model a command names, from a module, a file or the bundled examples."""

from __future__ import annotations

import ast
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
    f"({', '.join(EXAMPLES)}). The factory is a function or an nn.Module class, called with "
    "no arguments or with literal ones (file.py:Net(width=64)), or an nn.Module instance.")


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
    head, parenthesis, arguments = text.partition("(")
    module_name, _, attribute = head.rpartition(":")
    if not module_name:
        model, example_shapes = _example(text)
        input_shapes = input_shapes or example_shapes
    else:
        if not attribute:
            raise TargetError(f"TARGET {text!r} names no factory after the colon: type "
                              f"the function or class that builds the model, e.g. "
                              f"{module_name}:Net")
        args, kwargs = _arguments(parenthesis + arguments, text)
        module = _import(module_name, text)
        model = _build(_attribute(module, attribute, text), text, args, kwargs)
    if not input_shapes:
        raise TargetError(f"TARGET {text!r} needs its per-sample input shapes: give one "
                          "--input-shape per forward() argument, without the batch axis, e.g. "
                          "--input-shape 3,32,32")
    if eval_mode:
        model.eval()
    return Target(text, model, tuple(input_shapes))


def _example(name: str) -> tuple[nn.Module, tuple[tuple[int, ...], ...]]:
    if name.lower().endswith(".onnx"):
        raise TargetError(f"TARGET {name!r} is an ONNX file, not a PyTorch model: read it "
                          f"with `ncet import {name}` (its mapping, and the certificate "
                          "against onnxruntime)")
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
    name = _module_name(path)
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


def _module_name(path: Path) -> str:
    """The name a file is imported under: its stem, so that its classes show as the user
    wrote them (`model.Net`), unless that name is another module's (already imported, or
    importable, as `json.py` or `torch.py` would be): then a private `_ncet_target_` name."""
    name = re.sub(r"\W", "_", path.stem)
    if not name.isidentifier():
        name = "_" + name
    existing = sys.modules.get(name)
    if existing is not None:
        origin = getattr(existing, "__file__", None) or "?"
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a broken module of that name: keep clear of it
            spec = False
        origin = None if spec is None else getattr(spec, "origin", None) or "?"
    if origin is None or Path(origin).resolve() == path.resolve():
        return name  # no other module has this name, or it is this very file
    return "_ncet_target_" + name


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


def _arguments(call: str, text: str) -> tuple[tuple, dict]:
    """The literal arguments of `factory(1, width=64, name="x")` (Python literals only:
    numbers, strings, booleans, None, tuples, lists, dicts; nothing is evaluated)."""
    if not call:
        return (), {}
    try:
        tree = ast.parse("f" + call, mode="eval").body
        if not isinstance(tree, ast.Call):
            raise ValueError("not a call")
        args = tuple(ast.literal_eval(a) for a in tree.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in tree.keywords if k.arg}
        if len(kwargs) != len(tree.keywords):
            raise ValueError("**arguments")
    except (SyntaxError, ValueError, TypeError) as error:
        raise TargetError(f"TARGET {text!r}: the factory's arguments must be Python literals, "
                          f"as in path/to/file.py:factory(width=64, depth=2) ({error})") from None
    return args, kwargs


def _build(factory, text: str, args: tuple = (), kwargs: dict | None = None) -> nn.Module:
    kwargs = kwargs or {}
    if isinstance(factory, nn.Module):
        if args or kwargs:
            raise TargetError(f"TARGET {text!r} gives arguments to a model instance: name "
                              "its class or factory function instead")
        return factory
    if not callable(factory):
        raise TargetError(f"TARGET {text!r} is an object of type {type(factory).__name__}, "
                          "not an nn.Module, an nn.Module class or a function returning one")
    try:
        model = factory(*args, **kwargs)
    except Exception as error:  # the user's factory may raise anything
        given = "with no arguments" if not (args or kwargs) else "with the arguments given"
        raise TargetError(f"calling TARGET {text!r} {given} failed: {_describe(error)}. "
                          "Give its arguments as literals, e.g. file.py:factory(width=64), or "
                          "point TARGET at a function that builds the model") from error
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
