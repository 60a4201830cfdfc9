"""Reading a tensor's external data (`data_location: EXTERNAL`) from the model's folder, and
nothing outside it.

Every tensor's `location` is checked before any external file is opened (`plan_reads`): it
must be a relative path without a `..` component that, once links are resolved
(`os.path.realpath`, a linked folder component included), stays inside the folder, and names
a regular file (not a FIFO, a device or a folder); refused otherwise
(`onnx-external-data-path`). Its `offset` and `length` must be non-negative decimal integers
inside the file, and the bytes they span exactly what the tensor's element type and dims
need (`onnx-external-data`); all of it together no more than `MAX_FILE_BYTES` with the model
file (`onnx-file-too-large`). Then `read_planned` opens each file without following a link
(O_NOFOLLOW) or waiting on a FIFO (O_NONBLOCK), refuses one that changed since it was
checked, and reads only the span. onnx's own loader (1.23: C++ `_open_external_data`)
refuses absolute paths, `..` and links too, but not a span that does not fit the tensor, and
earlier versions checked less, so it is not used.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from onnx import TensorProto

from . import file_limits
from .file_limits import ELEMENT_BITS, declared_bytes
from .reading_errors import ONNXFileError

_NUMBER = re.compile(r"[0-9]{1,20}")
_ABSOLUTE = re.compile(r"^(?:[/\\]|[A-Za-z]:)")


@dataclass(frozen=True, slots=True)
class PlannedRead:
    """One tensor's external bytes, checked and not yet read."""

    tensor: TensorProto
    label: str  # the tensor and its location, as errors name them
    path: str  # resolved: no link left in it
    identity: tuple[int, int]  # (st_dev, st_ino) when checked
    offset: int
    length: int


def _entries(tensor: TensorProto, label: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key in info:
            raise ONNXFileError("onnx-external-data", f"{label} gives its external data's "
                                f"{entry.key!r} twice", name=tensor.name)
        info[entry.key] = entry.value
    return info


def _path_error(tensor: TensorProto, label: str, why: str) -> ONNXFileError:
    return ONNXFileError("onnx-external-data-path", f"{label}: {why}; NCET reads external data "
                         "only from regular files inside the model's folder, named by a "
                         "relative path", name=tensor.name)


def plan_reads(external: list[tuple[TensorProto, str]], base: str, what: str,
               file_size: int) -> list[PlannedRead]:
    """Check every external tensor's location, offset and length (nothing is opened) and
    return what to read.

    Raises:
        ONNXFileError: `onnx-external-data-path`, `onnx-external-data` or
            `onnx-file-too-large`, naming the first tensor refused and its location.
    """
    root = os.path.realpath(base)
    plans, total = [], file_size
    for tensor, where in external:
        info = _entries(tensor, f"{what}: tensor {tensor.name!r} ({where})")
        location = info.get("location", "")
        shown = location if len(location) <= 200 else location[:200] + "..."
        label = f"{what}: the external data of tensor {tensor.name!r} ({where}) at {shown!r}"
        if not location or "\x00" in location:
            raise _path_error(tensor, label, "the location is empty or holds a NUL byte")
        if _ABSOLUTE.match(location) or os.path.isabs(location):
            raise _path_error(tensor, label, "the location is an absolute path")
        if ".." in re.split(r"[/\\]", location):
            raise _path_error(tensor, label, "the location has a '..' component")
        path = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([path, root]) != root:
            raise _path_error(tensor, label, f"the location resolves to {path!r}, outside the "
                              f"model's folder {root!r}, through a link")
        try:
            st = os.stat(path)
        except OSError as exc:
            raise ONNXFileError("onnx-external-data", f"{label} cannot be read: "
                                f"{exc.strerror or type(exc).__name__}",
                                name=tensor.name) from None
        if not stat.S_ISREG(st.st_mode):
            raise _path_error(tensor, label, "it is not a regular file (a folder, a FIFO, a "
                              "device, ...)")
        offset, length = _span(tensor, label, info, st.st_size)
        total += length
        if total > file_limits.MAX_FILE_BYTES:
            raise ONNXFileError(
                "onnx-file-too-large", f"{label}: the model file and its external data come "
                f"to more than {file_limits.MAX_FILE_BYTES} bytes "
                "(ncet.onnx.file_limits.MAX_FILE_BYTES)", name=tensor.name)
        plans.append(PlannedRead(tensor, label, path, (st.st_dev, st.st_ino), offset, length))
    return plans


def _span(tensor: TensorProto, label: str, info: dict[str, str], size: int) -> tuple[int, int]:
    """The (offset, length) to read, checked against the file's size and the tensor."""
    numbers = {}
    for key in ("offset", "length"):
        if key in info:
            if not _NUMBER.fullmatch(info[key]):
                raise ONNXFileError("onnx-external-data", f"{label}: the {key} "
                                    f"{info[key][:40]!r} is not a non-negative integer",
                                    name=tensor.name)
            numbers[key] = int(info[key])
    offset = numbers.get("offset", 0)
    length = numbers.get("length", size - offset)
    if offset > size or offset + length > size:
        raise ONNXFileError("onnx-external-data", f"{label}: {length} bytes from offset "
                            f"{offset} run past the end of the {size}-byte file",
                            name=tensor.name)
    if tensor.data_type not in ELEMENT_BITS:
        raise ONNXFileError("onnx-external-data", f"{label}: element type "
                            f"{tensor.data_type} has no fixed size, so it cannot be in an "
                            "external file", name=tensor.name)
    need = declared_bytes(tensor.data_type, tensor.dims)
    if length != need:
        name = TensorProto.DataType.Name(tensor.data_type)
        raise ONNXFileError("onnx-external-data", f"{label}: the span holds {length} bytes, "
                            f"but {name} x {list(tensor.dims)[:8]} needs {need}",
                            name=tensor.name)
    return offset, length


_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
          | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def read_planned(plans: list[PlannedRead]) -> None:
    """Read each planned span into its tensor (`raw_data`; `data_location` DEFAULT and no
    `external_data`, as `onnx.load` leaves it), opening no link and no file that changed
    since `plan_reads` checked it."""
    for plan in plans:
        try:
            fd = os.open(plan.path, _FLAGS)
        except OSError as exc:
            raise ONNXFileError("onnx-external-data", f"{plan.label} cannot be opened: "
                                f"{exc.strerror or type(exc).__name__}",
                                name=plan.tensor.name) from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != plan.identity:
                raise _path_error(plan.tensor, plan.label, "the file changed after it was "
                                  "checked")
            f.seek(plan.offset)
            data = f.read(plan.length)
        if len(data) != plan.length:
            raise ONNXFileError("onnx-external-data", f"{plan.label}: the file ended before "
                                f"{plan.length} bytes from offset {plan.offset}",
                                name=plan.tensor.name)
        plan.tensor.raw_data = data
        plan.tensor.data_location = TensorProto.DEFAULT
        del plan.tensor.external_data[:]
