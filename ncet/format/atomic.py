"""Atomic file writes: whoever reads the path sees the old file or the new one, whole.

`ncet.save`, `ncet convert -o` and `ncet report -o` write through `atomic_writer`: the bytes
go to a temporary file in the destination's own folder, which is flushed, synced to disk and
then renamed over the destination (a rename within one file system is atomic on POSIX). A
write that fails or is killed midway leaves the previous file as it was; two processes
writing the same path leave one of their files, never a mix of both.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import BinaryIO


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file to write the new contents of `path` into; on a clean exit it replaces
    `path` (keeping an existing file's permission bits; a new file gets them from the umask),
    on an exception it is removed and `path` is left untouched.

    Raises:
        OSError: The folder cannot be written, or the rename fails.

    Example:
        >>> with atomic_writer("net.ncet") as f:
        ...     f.write(data)
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (where the platform lets a folder be synced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
