"""The spelling handlers, by family of operators: each turns one FX node's bound arguments
into a canonical op_type and attributes, or rejects it (internal to the frontend)."""
