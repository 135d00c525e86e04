"""Schema queries through onnx.defs: which schema version an opset selects, attribute defaults,
the element types a type constraint allows."""

from __future__ import annotations

__all__ = [
    "allowed_types",
    "attribute_default",
    "has_schema",
    "schema_versions",
    "since_version",
]

import functools
import re

import onnx
from onnx import defs

from onnxforge.errors import OnnxForgeError


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


@functools.cache
def since_version(op_type: str, opset: int, domain: str = "") -> int:
    """The since_version of the schema that ``opset`` selects (Split at 17 -> 13)."""
    try:
        return int(defs.get_schema(op_type, opset, _domain(domain)).since_version)
    except defs.SchemaError:
        raise OnnxForgeError(
            f"{domain or 'ai.onnx'}::{op_type} has no schema at opset {opset}"
        ) from None


@functools.cache
def schema_versions(op_type: str, domain: str = "") -> tuple[int, ...]:
    """Every since_version of an op, ascending (Split: 1, 2, 11, 13, 18)."""
    return tuple(
        sorted(
            {
                int(s.since_version)
                for s in defs.get_all_schemas_with_history()
                if s.name == op_type and s.domain == _domain(domain)
            }
        )
    )


def has_schema(op_type: str, domain: str = "") -> bool:
    return defs.has(op_type, _domain(domain))


@functools.cache
def attribute_default(op_type: str, opset: int, name: str, domain: str = "") -> object:
    """The default value of an attribute in the schema ``opset`` selects, or None."""
    schema = defs.get_schema(op_type, opset, _domain(domain))
    attr = schema.attributes.get(name)
    if attr is None or not attr.default_value.name:
        return None
    return onnx.helper.get_attribute_value(attr.default_value)


_TENSOR_TYPE = re.compile(r"^tensor\((\w+)\)$")


@functools.cache
def allowed_types(
    op_type: str, since_version: int, type_param: str = "T", domain: str = ""
) -> frozenset[int]:
    """The element types (TensorProto numbers) the constraint ``type_param`` of the schema with
    this ``since_version`` allows (Sub-13 "T": float16, float, double, bfloat16, int32, int64,
    uint32, uint64). Sequence, optional and map types are left out."""
    try:
        schema = defs.get_schema(op_type, since_version, _domain(domain))
    except defs.SchemaError:
        raise OnnxForgeError(
            f"{domain or 'ai.onnx'}::{op_type} has no schema at opset {since_version}"
        ) from None
    if int(schema.since_version) != since_version:
        raise OnnxForgeError(
            f"{op_type}-{since_version} is no schema version; versions: "
            f"{', '.join(map(str, schema_versions(op_type, domain)))}"
        )
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_param:
            found = (_TENSOR_TYPE.match(t) for t in constraint.allowed_type_strs)
            return frozenset(
                int(onnx.TensorProto.DataType.Value(m.group(1).upper())) for m in found if m
            )
    params = ", ".join(c.type_param_str for c in schema.type_constraints) or "none"
    raise OnnxForgeError(
        f"{op_type}-{since_version} has no type constraint {type_param!r}; constraints: {params}"
    )
