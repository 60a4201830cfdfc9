"""The export profiles as data: each one's batch rule, ONNX op set and pattern table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..ir import OP_SCHEMAS
from .patterns import PATTERNS, Pattern
from .verifier_patterns import VERIFIER_PATTERNS

OPERATOR_OP_TYPES = frozenset(OP_SCHEMAS) - {"Input", "Output"}
"""The op_types a profile needs a pattern for (Input and Output are the graph's own)."""

MIN_OPSET = 18
"""The lowest opset `to_onnx` writes: ReduceMean's axes and Pad's pads as inputs,
Squeeze/Unsqueeze axes as inputs."""


@dataclass(frozen=True, slots=True, eq=False)
class Profile:
    """One way of writing a GraphIR as ONNX.

    Attributes:
        name: The `profile=` argument of `to_onnx`, written to `metadata_props["ncet.profile"]`.
        description: One sentence: whom the profile is for and how it spells things.
        fixed_batch: None: the batch axis is the symbolic "N" unless the caller gives
            `batch=`; an int: the batch size every export of the profile has (another
            `batch=` is a ValueError).
        ops: The ONNX op types the profile may write (the builder refuses any other);
            None for any.
        patterns: op_type -> the pattern function writing that IR node's ONNX nodes.
        default_opset: The opset `to_onnx(..., opset=None)` writes in this profile: the one
            its consumers are tested at (docs/export.md).
    """

    name: str
    description: str
    fixed_batch: int | None
    ops: frozenset[str] | None
    patterns: Mapping[str, Pattern]
    default_opset: int = 21

    def __post_init__(self):
        if set(self.patterns) != OPERATOR_OP_TYPES:
            missing = sorted(OPERATOR_OP_TYPES - set(self.patterns))
            extra = sorted(set(self.patterns) - OPERATOR_OP_TYPES)
            raise ValueError(f"profile {self.name!r} needs one pattern per operator op_type "
                             f"(missing {missing}, unknown {extra})")
        if self.fixed_batch is not None and (isinstance(self.fixed_batch, bool)
                                             or not isinstance(self.fixed_batch, int)
                                             or self.fixed_batch < 1):
            raise ValueError(f"profile {self.name!r}: fixed_batch must be None or a positive "
                             f"int, not {self.fixed_batch!r}")
        if isinstance(self.default_opset, bool) or not isinstance(self.default_opset, int) \
                or self.default_opset < MIN_OPSET:
            raise ValueError(f"profile {self.name!r}: default_opset must be an int, "
                             f"{MIN_OPSET} or later, not {self.default_opset!r}")
        object.__setattr__(self, "patterns", MappingProxyType(dict(self.patterns)))
        if self.ops is not None:
            object.__setattr__(self, "ops", frozenset(self.ops))


VERIFIER_OPS = frozenset({
    "Gemm", "Conv", "Relu", "LeakyRelu", "Flatten", "Reshape", "Add", "Sub", "Mul", "Div",
    "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "Concat",
    "Transpose", "Slice", "ReduceMean", "Identity", "Pad",
})
"""The ONNX op types the verifier profile writes (docs/export.md says why these)."""

CANONICAL = Profile(
    "canonical", "The natural ONNX spelling of each op_type, batch axis symbolic by default.",
    fixed_batch=None, ops=None, patterns=PATTERNS, default_opset=21)

VERIFIER = Profile(
    "verifier", "The shape verification tools converge on: batch 1, Flatten then "
    "Gemm(transB=1) for dense layers, static reshapes, and no op outside VERIFIER_OPS.",
    fixed_batch=1, ops=VERIFIER_OPS, patterns={**PATTERNS, **VERIFIER_PATTERNS},
    # onnx2torch 1.5.15 (alpha-beta-CROWN's importer) has no converter for AveragePool,
    # Identity and Reshape from opset 19, nor Flatten, Transpose, Unsqueeze from 21
    default_opset=18)

PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for p in (CANONICAL, VERIFIER)})
"""The export profiles there are, by name (docs/export.md)."""
