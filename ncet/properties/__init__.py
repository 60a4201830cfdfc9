"""VNN-LIB properties: `read_vnnlib` reads a file into a `Property` (an input region of boxes
and an unsafe output set of polytopes A y <= b, every constant exact), `write_vnnlib` writes
one back (docs/properties.md)."""

from .errors import VNNLIB_REASONS, VNNLIBError
from .property import Box, Case, Polytope, Property
from .reader import read_vnnlib
from .writer import write_vnnlib

__all__ = ["Box", "Case", "Polytope", "Property", "VNNLIBError", "VNNLIB_REASONS",
           "read_vnnlib", "write_vnnlib"]
