"""Schema queries through onnx.defs: which schema version an opset selects, attribute defaults,
the element types a type constraint allows."""

from __future__ import annotations

__all__ = [
    "allowed_types",
    "attribute_default",
    "has_schema",
    "has_schema_at",
    "latest_opset",
    "min_ir_version",
    "node_problem",
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
def has_schema_at(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether ``opset`` has a schema for the op that is not deprecated."""
    try:
        schema = defs.get_schema(op_type, opset, _domain(domain))
    except defs.SchemaError:
        return False
    return not schema.deprecated


def latest_opset() -> int:
    """The newest default-domain opset onnx defines."""
    return int(defs.onnx_opset_version())


def min_ir_version(opsets: dict[str, int]) -> int:
    """The lowest IR version a model importing these opsets may declare (onnx's table)."""
    ids = [onnx.helper.make_opsetid(_domain(d), v) for d, v in opsets.items()]
    return int(onnx.helper.find_min_ir_version_for(ids, ignore_unknown=True))


def node_problem(
    op_type: str,
    opset: int,
    *,
    attrs: set[str],
    n_inputs: int,
    n_outputs: int,
    input_dtypes: list[int | None],
    domain: str = "",
) -> str | None:
    """Why a node with these attributes, arity and input element types is not valid under
    the schema ``opset`` selects, or None when it is (unknown dtypes are not held against it)."""
    try:
        schema = defs.get_schema(op_type, opset, _domain(domain))
    except defs.SchemaError:
        return f"{op_type} has no schema at opset {opset}"
    version = f"{op_type}-{schema.since_version}"
    unknown = sorted(attrs - set(schema.attributes))
    if unknown:
        return f"{version} has no attribute {', '.join(unknown)}"
    missing = sorted(
        name for name, a in schema.attributes.items() if a.required and name not in attrs
    )
    if missing:
        return f"{version} requires attribute {', '.join(missing)}"
    if not schema.min_input <= n_inputs <= schema.max_input:
        return f"{version} takes {schema.min_input}..{schema.max_input} inputs, not {n_inputs}"
    if not schema.min_output <= n_outputs <= schema.max_output:
        return f"{version} has {schema.min_output}..{schema.max_output} outputs, not {n_outputs}"
    formals = list(schema.inputs)
    for i, dtype in enumerate(input_dtypes):
        if dtype is None or not formals:
            continue
        formal = formals[min(i, len(formals) - 1)]
        allowed = _constraint_types(op_type, int(schema.since_version), formal.type_str, domain)
        if allowed is not None and dtype not in allowed:
            return f"{version} input {formal.name!r} does not allow element type {dtype}"
    return None


@functools.cache
def _constraint_types(
    op_type: str, since: int, type_str: str, domain: str
) -> frozenset[int] | None:
    """The element types a formal parameter allows: its constraint's, or its literal type."""
    literal = _TENSOR_TYPE.match(type_str)
    if literal:
        return frozenset({int(onnx.TensorProto.DataType.Value(literal.group(1).upper()))})
    try:
        types = allowed_types(op_type, since, type_str, domain)
    except OnnxForgeError:
        return None
    return types or None


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
