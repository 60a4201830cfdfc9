"""An ONNX model given as an `onnx.ModelProto`, a path or the file's bytes, read and checked
the same way whatever its form (`read_onnx`), and the error a malformed one raises."""

from __future__ import annotations

import os

import onnx

from ..errors import NCETError

ONNX_INPUT_REASONS: dict[str, str] = {
    "onnx-unparsable": "the bytes do not parse as an ONNX ModelProto",
    "onnx-empty": "no IR version, no graph or no graph nodes",
    "onnx-invalid": "onnx.checker rejects the model (attribute types, required attributes, "
                    "tensor sizes, ...)",
    "onnx-external-data": "a tensor's external data cannot be read next to the file",
    "onnx-malformed-node": "a node's attributes or constants cannot be read as its op "
                           "defines them",
}
"""The stable reason codes of `ONNXInputError`, with what each means."""


class ONNXInputError(NCETError, ValueError):
    """An ONNX model that is not a valid one (a ValueError too).

    Attributes:
        code: A stable reason code, one of `ONNX_INPUT_REASONS`.
    """

    def __init__(self, code: str, message: str):
        assert code in ONNX_INPUT_REASONS, f"unregistered reason code {code!r}"
        self.code = code
        super().__init__(f"{message.rstrip('.')} [{code}]")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_onnx(model_or_path, caller: str = "read_onnx()") -> onnx.ModelProto:
    """The model `model_or_path` names, checked by onnx.checker whatever its form.

    A path's external data is loaded from the file's folder (as `onnx.load` does); bytes and
    a ModelProto have no folder, so theirs must already be in memory.

    Args:
        model_or_path: An `onnx.ModelProto`, a path (str or os.PathLike), or the file's bytes.
        caller: The public function's name, for the TypeError.

    Returns:
        The ModelProto (the one given, not a copy, for a ModelProto).

    Raises:
        ONNXInputError: The bytes do not parse, there is no graph, or onnx.checker rejects
            the model; `.code` says which.
        TypeError: `model_or_path` is none of the accepted kinds.
        OSError: The path cannot be read.
    """
    if isinstance(model_or_path, onnx.ModelProto):
        model, what = model_or_path, "the onnx.ModelProto given"
    else:
        if isinstance(model_or_path, (bytes, bytearray, memoryview)):
            data, what, folder = bytes(model_or_path), "the bytes given", None
        elif isinstance(model_or_path, (str, os.PathLike)):
            path = os.fspath(model_or_path)
            what, folder = repr(path), os.path.dirname(os.path.abspath(path))
            with open(path, "rb") as f:
                data = f.read()
        else:
            raise TypeError(f"{caller} expects an onnx.ModelProto, a path or bytes, not "
                            f"{type(model_or_path).__name__}")
        model = onnx.ModelProto()
        try:
            model.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError, or worse, on a hostile file
            raise ONNXInputError("onnx-unparsable", f"{what} is not an ONNX model: it does "
                                 f"not parse as one ({type(exc).__name__})") from None
        if folder is not None:  # a no-op without external data
            try:
                onnx.load_external_data_for_model(model, folder)
            except Exception as exc:  # a missing file, a path outside the folder, ...
                raise ONNXInputError("onnx-external-data", f"{what} is not a valid ONNX "
                                     f"model: {_first_line(exc)}") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise ONNXInputError("onnx-empty", f"{what} is not an ONNX model: no IR version or "
                             "no graph nodes")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and its C++ relatives
        raise ONNXInputError("onnx-invalid", f"{what} is not a valid ONNX model: "
                             f"{_first_line(exc)}") from None
    return model

