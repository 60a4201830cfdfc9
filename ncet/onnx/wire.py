"""The protobuf wire encoding of the fields `GraphBuilder` writes (onnx/onnx.proto's numbers).

The builder appends each node, initializer and value info to its graph as encoded bytes and
the model is parsed from them once, which costs a fraction of building the protos field by
field through the Python API (docs/performance.md). Parsing accepts repeated fields in any
interleaving and packed or unpacked scalars, and the file's bytes come from the parsed
message's own serialization, so these functions need only encode each field, not the
serializer's canonical order; tests/test_export_bytes.py holds every export to the bytes of
the same model built with onnx.helper. Only messages whose every field is listed here are
encoded; attributes and types, built from few distinct values, are encoded once by protobuf
itself (`GraphBuilder`'s caches).
"""

from __future__ import annotations


def _encode_varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = tuple(_encode_varint(n) for n in range(1 << 14))


def varint(n: int) -> bytes:
    """`n` as a base-128 varint; a negative int64 as its two's complement (10 bytes)."""
    return _SMALL[n] if 0 <= n < 16384 else _encode_varint(n)


def key(number: int, wire_type: int) -> bytes:
    """A field's key: its number and wire type (0 varint, 2 length-delimited)."""
    return varint(number << 3 | wire_type)


def delimited(field_key: bytes, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes or an embedded message."""
    return field_key + varint(len(payload)) + payload


def text(field_key: bytes, value: str) -> bytes:
    """A string field (UTF-8)."""
    return delimited(field_key, value.encode())


def varints(field_key: bytes, values) -> bytes:
    """A repeated integer field, unpacked (one key per value)."""
    return b"".join(field_key + varint(v) for v in values)


# GraphProto
GRAPH_NODE, GRAPH_NAME, GRAPH_INITIALIZER = key(1, 2), key(2, 2), key(5, 2)
GRAPH_DOC, GRAPH_INPUT, GRAPH_OUTPUT, GRAPH_VALUE_INFO = (key(10, 2), key(11, 2), key(12, 2),
                                                          key(13, 2))
# NodeProto
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE = key(1, 2), key(2, 2), key(3, 2), key(4, 2)
NODE_ATTRIBUTE, NODE_DOC = key(5, 2), key(6, 2)
# TensorProto
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_INT64_DATA = key(1, 0), key(2, 0), key(7, 0)
TENSOR_NAME, TENSOR_RAW_DATA = key(8, 2), key(9, 2)
# ValueInfoProto
VALUE_NAME, VALUE_TYPE = key(1, 2), key(2, 2)
