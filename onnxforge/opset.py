"""Schema queries through onnx.defs: which schema version an opset selects, attribute defaults,
the element types a type constraint allows."""

from __future__ import annotations

__all__ = [
    "REDUCE_OPS",
    "SchemaChange",
    "SchemaShape",
    "allowed_types",
    "attribute_default",
    "has_schema",
    "has_schema_at",
    "latest_opset",
    "min_ir_version",
    "newest_opset",
    "node_problem",
    "op_types",
    "schema_change",
    "schema_shape",
    "schema_versions",
    "since_version",
    "runtime_defined",
    "RUNTIME_DEFINED",
]

import functools
import re
from dataclasses import dataclass

import onnx
from onnx import defs

from onnxforge.errors import OnnxForgeError

REDUCE_OPS = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
)
"""The reductions: one schema shape (keepdims; axes an attribute, then an input: ReduceSum
from 13, the others from 18)."""


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


RUNTIME_DEFINED = frozenset({"LayerNormalization", "SimplifiedLayerNormalization"})
"""Ops onnxruntime defines in the ONNX domain from opset 1 (its contrib_defs.cc), which its
transformers optimizer writes into models of any opset: LayerNormalization before ONNX
added it at 17, SimplifiedLayerNormalization always. onnxruntime runs them; so do we."""


def runtime_defined(op_type: str, opset: int, domain: str = "") -> bool:
    """True for an op of RUNTIME_DEFINED that ONNX itself does not define at ``opset``."""
    return (
        _domain(domain) == "" and op_type in RUNTIME_DEFINED and not defs.has(op_type, opset, "")
    )


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
def _versions_by_op() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op_type) -> every since_version, read once from onnx.defs."""
    found: dict[tuple[str, str], set[int]] = {}
    for s in defs.get_all_schemas_with_history():
        found.setdefault((s.domain, s.name), set()).add(int(s.since_version))
    return {key: tuple(sorted(v)) for key, v in found.items()}


@functools.cache
def schema_versions(op_type: str, domain: str = "") -> tuple[int, ...]:
    """Every since_version of an op, ascending (Split: 1, 2, 11, 13, 18)."""
    return _versions_by_op().get((_domain(domain), op_type), ())


@functools.cache  # asked once per op by inference
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


_ONNX_DOMAINS = {"": 2, "ai.onnx.ml": 3, "ai.onnx.preview.training": 4}  # VERSION_TABLE columns


@functools.cache
def newest_opset(domain: str = "") -> int | None:
    """The newest opset onnx defines for one of its domains; None for any other domain."""
    domain = _domain(domain)
    if domain == "":
        return latest_opset()
    column = _ONNX_DOMAINS.get(domain)
    if column is None:
        return None
    return max(int(row[column]) for row in onnx.helper.VERSION_TABLE if len(row) > column)


@dataclass(frozen=True)
class SchemaShape:
    """What a node must look like under a schema: arity and attribute kinds."""

    since_version: int
    min_input: int
    max_input: int
    min_output: int
    max_output: int
    attributes: dict[str, tuple[int, bool]]  # name -> (AttributeProto type number, required)


@functools.cache
def schema_shape(op_type: str, opset: int, domain: str = "") -> SchemaShape | None:
    """Arity and attribute kinds of the schema ``opset`` selects (deprecated ones included),
    or None when there is none."""
    try:
        schema = defs.get_schema(op_type, opset, _domain(domain))
    except defs.SchemaError:
        return None
    return SchemaShape(
        int(schema.since_version),
        int(schema.min_input),
        int(schema.max_input),
        int(schema.min_output),
        int(schema.max_output),
        {
            name: (int(a.type.value), bool(a.required))  # type: ignore[attr-defined]
            for name, a in schema.attributes.items()
        },
    )


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
    output_dtypes: list[int | None] | None = None,
    input_kinds: list[str | None] | None = None,
    output_kinds: list[str | None] | None = None,
    domain: str = "",
) -> str | None:
    """Why a node with these attributes, arity and element types is not valid under the schema
    ``opset`` selects, or None when it is (unknown dtypes are not held against it). Each
    input's and output's type must be one its constraint allows, and the values bound to one
    type parameter (Pow-7's ``T``) must share their type. ``*_kinds`` name what each value is
    ("tensor", "seq", "optional", ...; None: unknown) for formals that may be other than
    tensors (If-13's outputs take sequences, If-16's optionals too)."""
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
    for side, formals, kinds in (
        ("input", list(schema.inputs), input_kinds or []),
        ("output", list(schema.outputs), output_kinds or []),
    ):
        for i, kind in enumerate(kinds):
            if kind is None or not formals:
                continue
            formal = formals[min(i, len(formals) - 1)]
            strings = _constraint_strings(
                op_type, int(schema.since_version), formal.type_str, domain
            )
            if strings and not any(t.startswith(f"{kind}(") for t in strings):
                return f"{version} {side} {formal.name!r} does not take a {kind}"
    bound: dict[str, tuple[int, str]] = {}
    for side, formals, dtypes in (
        ("input", list(schema.inputs), input_dtypes),
        ("output", list(schema.outputs), output_dtypes or []),
    ):
        for i, dtype in enumerate(dtypes):
            if dtype is None or not formals:
                continue
            formal = formals[min(i, len(formals) - 1)]
            allowed = _constraint_types(
                op_type, int(schema.since_version), formal.type_str, domain
            )
            if allowed is not None and dtype not in allowed:
                return f"{version} {side} {formal.name!r} does not allow element type {dtype}"
            heterogeneous = i >= len(formals) - 1 and not formal.is_homogeneous
            if _TENSOR_TYPE.match(formal.type_str) or heterogeneous:
                continue
            first = bound.setdefault(formal.type_str, (dtype, formal.name))
            if first[0] != dtype:
                return (
                    f"{version} binds {formal.name!r} and {first[1]!r} to one type "
                    f"{formal.type_str}, but they are element types {first[0]} and {dtype}"
                )
    return None


@functools.cache
def _constraint_strings(op_type: str, since: int, type_str: str, domain: str) -> frozenset[str]:
    """The type strings a formal parameter allows ("tensor(float)", "seq(tensor(int64))")."""
    if "(" in type_str:
        return frozenset({type_str})
    schema = defs.get_schema(op_type, since, _domain(domain))
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            return frozenset(constraint.allowed_type_strs)
    return frozenset()


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


def op_types(domain: str = "") -> tuple[str, ...]:
    """Every op of the domain that has a schema in some opset, sorted."""
    return tuple(sorted(name for d, name in _versions_by_op() if d == _domain(domain)))


@dataclass(frozen=True)
class SchemaChange:
    """What changed from the schema before ``since_version`` (``previous``, None when the op
    first appears there) to the schema at ``since_version``: attributes, formal parameters,
    element types, deprecation."""

    op_type: str
    since_version: int
    previous: int | None
    attributes_added: tuple[str, ...] = ()
    attributes_removed: tuple[str, ...] = ()
    required_attributes_removed: tuple[str, ...] = ()
    defaults_changed: tuple[str, ...] = ()  # declared in both, different
    attribute_kinds_changed: tuple[str, ...] = ()  # int <-> float, string <-> int, ...
    attributes_now_required: tuple[str, ...] = ()
    attributes_now_optional: tuple[str, ...] = ()
    required_attributes_added: tuple[str, ...] = ()
    inputs_added: tuple[str, ...] = ()  # optional formal parameters appended
    inputs_changed: bool = False  # any other change of the inputs' names, options or arity
    outputs_added: tuple[str, ...] = ()
    outputs_changed: bool = False
    types_widened: bool = False
    types_narrowed: bool = False
    deprecated: bool = False

    @property
    def introduced(self) -> bool:
        return self.previous is None

    @property
    def empty(self) -> bool:
        """Nothing but descriptions changed."""
        return self == SchemaChange(self.op_type, self.since_version, self.previous)


def _formals(params: object) -> list[tuple[str, int]]:
    return [(p.name, int(p.option.value)) for p in params]  # type: ignore[attr-defined]


def _appended(old: list[tuple[str, int]], new: list[tuple[str, int]]) -> bool:
    """``new`` is ``old`` with optional formal parameters appended (or the same)."""
    optional = int(defs.OpSchema.FormalParameterOption.Optional.value)  # type: ignore[attr-defined]
    return new[: len(old)] == old and all(o == optional for _, o in new[len(old) :])


def _constraint_sets(schema: defs.OpSchema) -> dict[str, dict[str, frozenset[str]]]:
    """Allowed type strings per formal parameter name (constraints resolved)."""
    by_param = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    out: dict[str, dict[str, frozenset[str]]] = {"in": {}, "out": {}}
    for side, params in (("in", schema.inputs), ("out", schema.outputs)):
        for p in params:
            out[side][p.name] = by_param.get(p.type_str, frozenset({p.type_str}))
    return out


@functools.cache
def schema_change(op_type: str, since_version: int, domain: str = "") -> SchemaChange:
    """How the schema with this since_version differs from the one before it."""
    versions = schema_versions(op_type, domain)
    if since_version not in versions:
        raise OnnxForgeError(f"{op_type}-{since_version} is no schema version")
    new = defs.get_schema(op_type, since_version, _domain(domain))
    index = versions.index(since_version)
    if index == 0:
        return SchemaChange(op_type, since_version, None, deprecated=bool(new.deprecated))
    previous = versions[index - 1]
    old = defs.get_schema(op_type, previous, _domain(domain))
    old_attrs, new_attrs = old.attributes, new.attributes

    def default(a: defs.OpSchema.Attribute) -> object:
        return onnx.helper.get_attribute_value(a.default_value) if a.default_value.name else None

    common = sorted(set(old_attrs) & set(new_attrs))
    added = sorted(set(new_attrs) - set(old_attrs))
    old_in, new_in = _formals(old.inputs), _formals(new.inputs)
    old_out, new_out = _formals(old.outputs), _formals(new.outputs)
    in_appended = _appended(old_in, new_in)
    out_appended = _appended(old_out, new_out)
    old_types, new_types = _constraint_sets(old), _constraint_sets(new)
    widened = narrowed = False
    for side in ("in", "out"):
        for name in set(old_types[side]) & set(new_types[side]):
            widened |= bool(new_types[side][name] - old_types[side][name])
            narrowed |= bool(old_types[side][name] - new_types[side][name])
    return SchemaChange(
        op_type,
        since_version,
        previous,
        attributes_added=tuple(a for a in added if not new_attrs[a].required),
        required_attributes_added=tuple(a for a in added if new_attrs[a].required),
        attributes_removed=tuple(sorted(set(old_attrs) - set(new_attrs))),
        required_attributes_removed=tuple(
            sorted(a for a in set(old_attrs) - set(new_attrs) if old_attrs[a].required)
        ),
        defaults_changed=tuple(
            a
            for a in common
            if default(old_attrs[a]) is not None
            and default(new_attrs[a]) is not None
            and default(old_attrs[a]) != default(new_attrs[a])
        ),
        attribute_kinds_changed=tuple(a for a in common if old_attrs[a].type != new_attrs[a].type),
        attributes_now_required=tuple(
            a for a in common if new_attrs[a].required and not old_attrs[a].required
        ),
        attributes_now_optional=tuple(
            a for a in common if old_attrs[a].required and not new_attrs[a].required
        ),
        inputs_added=tuple(n for n, _ in new_in[len(old_in) :]) if in_appended else (),
        inputs_changed=not in_appended
        or old.min_input != new.min_input
        or (len(new_in) == len(old_in) and old.max_input != new.max_input),
        outputs_added=tuple(n for n, _ in new_out[len(old_out) :]) if out_appended else (),
        outputs_changed=not out_appended
        or old.min_output != new.min_output
        or (len(new_out) == len(old_out) and old.max_output != new.max_output),
        types_widened=widened,
        types_narrowed=narrowed,
        deprecated=bool(new.deprecated),
    )
