"""The file format: GraphIR saved as one deterministic file and loaded back without running
code, under a budget, with its meaning checked (docs/file-format.md).

Its public face is `save` and `load`; the modules inside are internal.
"""

from .file import load, save

__all__ = ["load", "save"]
