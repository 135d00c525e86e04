"""Schema queries through onnx.defs: which schema version an opset selects, attribute defaults."""

from __future__ import annotations

__all__ = ["attribute_default", "has_schema", "schema_versions", "since_version"]

import functools

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
