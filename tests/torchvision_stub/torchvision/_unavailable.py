"""The one kind of attribute the stand-in has: a function that refuses to run."""

from __future__ import annotations

from collections.abc import Callable


def unavailable(name: str) -> Callable[..., None]:
    """A function named `name` raising NotImplementedError that names it."""

    def refuse(*args, **kwargs) -> None:
        raise NotImplementedError(f"{name} is not available: tests/torchvision_stub stands in "
                                  "for torchvision, which NCET's exports never need")

    refuse.__name__ = refuse.__qualname__ = name.rpartition(".")[2]
    return refuse
