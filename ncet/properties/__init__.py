"""VNN-LIB properties: `read_vnnlib` reads a file into a `Property` (an input region of boxes
and an unsafe output set of polytopes A y <= b, every constant exact), `write_vnnlib` writes
one back (docs/properties.md); `adjudicate` judges a verifier's counterexample
(docs/adjudication.md)."""

from .adjudication import VERDICTS, Adjudication, adjudicate
from .errors import VNNLIB_REASONS, VNNLIBError
from .property import Box, Case, Polytope, Property
from .reader import read_vnnlib
from .witness import WITNESS_REASONS, Witness, WitnessError, read_witness
from .writer import write_vnnlib

__all__ = ["Adjudication", "Box", "Case", "Polytope", "Property", "VERDICTS", "VNNLIBError",
           "VNNLIB_REASONS", "WITNESS_REASONS", "Witness", "WitnessError", "adjudicate",
           "read_vnnlib", "read_witness", "write_vnnlib"]
