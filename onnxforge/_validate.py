"""What makes a model unfit for any work, found before any work: the graph's invariants, ops
against their schemas, element types, tensor data against its dims, subgraph and function
arity. Every command runs it after loading, so a hostile model meets one clear error instead of
a crash in whatever pass first trips over it."""

from __future__ import annotations

__all__ = ["MAX_ELEMENTS", "model_problems", "text_problem", "validate"]

import logging
from collections.abc import Iterator
from operator import attrgetter
from typing import Any

from onnxforge import opset as schemas
from onnxforge.errors import InvalidModelError
from onnxforge.io._tensors import data_problem
from onnxforge.ir import (
    AttrRef,
    DType,
    Graph,
    Model,
    Op,
    OpaqueType,
    SparseTensor,
    Tensor,
    TensorType,
    _where,
    problems,
    walk_graphs,
)

logger = logging.getLogger(__name__)

MAX_ELEMENTS = (1 << 63) - 1
"""A tensor type with more elements than int64 counts describes nothing a runtime can hold."""
MAX_PROBLEMS = 100
"""Problems listed at most; the rest are counted in one line."""
_DTYPE_ATTRIBUTES = frozenset({"to", "dtype", "output_dtype", "output_datatype", "stash_type"})
_MAY_BE_ZERO = frozenset({"output_dtype", "output_datatype"})  # 0: "as the zero point says"
_ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
_KIND_NAMES = {
    1: "float", 2: "int", 3: "string", 4: "tensor", 5: "graph", 6: "floats", 7: "ints",
    8: "strings", 9: "tensors", 10: "graphs", 11: "sparse tensor", 12: "sparse tensors",
    13: "type", 14: "types",
}  # fmt: skip
_LIST_OF = {1: 6, 2: 7, 3: 8, 4: 9, 5: 10, 11: 12, 13: 14}


def validate(model: Model, where: str = "") -> None:
    """Raise InvalidModelError listing every problem ``model_problems`` finds."""
    found = model_problems(model)
    if found:
        raise InvalidModelError(found, where=where)


def model_problems(model: Model) -> list[str]:
    """Every reason the model is invalid, one line each (empty when it is fit to work on)."""
    text = text_problem(model)
    if text is not None:  # names that are bytes would trip every check below
        return [text]
    found = problems(model)
    found += _opset_problems(model)
    local = {fn.key: fn for fn in model.functions}
    for graph, scope, opsets in _graphs(model):
        where = _where(graph, scope)
        found += _graph_problems(graph, where, opsets, local)
    # An IR < 4 initializer that is not also a graph input breaks that version's rule, but
    # onnxruntime runs such a model (the initializer is a constant), so it is accepted here and
    # left to onnx's checker in `check` (onnxruntime's own datasets/mul_1.onnx is one).
    found += _recursion_problems(model)
    if len(found) > MAX_PROBLEMS:
        found = [*found[:MAX_PROBLEMS], f"... and {len(found) - MAX_PROBLEMS} more problems"]
    return found


def text_problem(model: Model) -> str | None:
    """The first name or text field that is not UTF-8 (protobuf then hands over bytes), as a
    problem: nothing that prints or sorts names can work on such a model."""
    found = next((t for t in _texts(model) if type(t) is not str), None)
    if found is None:
        return None
    shown = found[:80] if isinstance(found, bytes) else found
    return f"a name or text field is not UTF-8, as ONNX requires: {shown!r}"


def _texts(model: Model) -> Iterator[object]:
    """Every text field; each graph's names and op fields in bulk, and one by one only where
    a batch holds something that is not a str."""
    yield from (model.producer_name, model.producer_version, model.domain, model.doc_string)
    yield from (t for pair in model.metadata_props for t in pair)
    yield from model.opset_imports
    for fn in model.functions:
        yield from (fn.name, fn.domain, fn.overload, fn.doc_string, *fn.attributes)
        yield from fn.opset_imports
        yield from (t for pair in fn.metadata_props for t in pair)
    for graph, _, _ in _graphs(model):
        yield from (graph.name, graph.doc_string)
        yield from (t for pair in graph.metadata_props for t in pair)
        values, ops = graph._values, graph._ops
        value_props = [
            t for v in values if v.metadata_props for pair in v.metadata_props for t in pair
        ]
        attr_names = [name for op in ops if op.attrs for name in op.attrs]
        op_props = [
            t for op in ops if op.metadata_props for pair in op.metadata_props for t in pair
        ]
        kinds: set[type] = set()  # gathered in C (map, attrgetter): no list of every name
        for f in ("name", "doc_string"):
            kinds.update(map(type, map(attrgetter(f), values)))
        for f in _OP_TEXTS:
            kinds.update(map(type, map(attrgetter(f), ops)))
        for texts in (value_props, attr_names, op_props):
            kinds.update(map(type, texts))
        if not kinds <= {str}:  # one by one, in the order the message has always named
            yield from (v.name for v in values)
            yield from (v.doc_string for v in values)
            yield from value_props
            for f in _OP_TEXTS:
                yield from map(attrgetter(f), ops)
            yield from attr_names
            yield from op_props


_OP_TEXTS = ("op_type", "domain", "name", "overload", "doc_string")


def _graphs(model: Model) -> Iterator[tuple[Graph, str, dict[str, int]]]:
    for graph in walk_graphs(model.graph):
        yield graph, "graph", dict(model.opset_imports)
    for fn in model.functions:
        opsets = dict(fn.opset_imports) or dict(model.opset_imports)
        for graph in walk_graphs(fn.graph):
            yield graph, f"function {fn.domain}::{fn.name}", opsets


def _opset_problems(model: Model) -> list[str]:
    found = []
    owners = [("the model", dict(model.opset_imports))]
    owners += [(f"function {f.domain}::{f.name}", dict(f.opset_imports)) for f in model.functions]
    for owner, opsets in owners:
        for domain, version in sorted(opsets.items()):
            newest = schemas.newest_opset(domain)
            if newest is not None and version > newest:
                found.append(
                    f"{owner} imports {domain or 'ai.onnx'} opset {version}; the newest onnx "
                    f"defines is {newest}"
                )
            elif version < 1:
                found.append(f"{owner} imports {domain or 'ai.onnx'} opset {version}")
    return found


def _opset_of(opsets: dict[str, int], domain: str) -> int | None:
    if domain in ("", "ai.onnx"):
        return opsets.get("", opsets.get("ai.onnx"))
    return opsets.get(domain)


# -- one graph --------------------------------------------------------------------------------
def _graph_problems(
    graph: Graph, where: str, opsets: dict[str, int], local: dict[tuple[str, str, str], Any]
) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    for value in graph.inputs:
        if value.name in seen:
            found.append(f"{where}: the graph input {value.name!r} is listed more than once")
        seen.add(value.name)
    for value in graph.initializers:
        const = value.const
        if isinstance(const, Tensor):
            problem = _tensor_problem(const)
            if problem:
                found.append(f"{where}: initializer {value.name!r} {problem}")
        elif isinstance(const, SparseTensor):
            problem = _sparse_problem(const)
            if problem:
                found.append(f"{where}: sparse initializer {value.name!r} {problem}")
    for value in graph.values():
        if value.type is not None and value._graph is graph:  # most have none before inference
            problem = _type_problem(value.type)
            if problem:
                found.append(f"{where}: value {value.name!r} {problem}")
    plain: dict[tuple[str, str, str, int, int], list[str]] = {}
    for op in graph._ops:
        if op.attrs or (op.domain, op.op_type, op.overload) in local:
            reasons = _op_problems(op, opsets, local)
        else:  # kind and arity decide (see _signature): one check per kind, not per op
            kind = (op.op_type, op.domain, op.overload, len(op._inputs), len(op._outputs))
            reasons = plain.get(kind)  # type: ignore[assignment]
            if reasons is None:
                reasons = plain[kind] = _op_problems(op, opsets, local)
        if reasons:
            found += [f"{where}: {op.describe()} {p}" for p in reasons]
    return found


def _type_problem(t: object) -> str | None:
    if not isinstance(t, TensorType):
        return None
    if t.dtype not in DType._value2member_map_ or t.dtype == DType.UNDEFINED:
        return f"has the unknown element type {t.dtype}"
    if t.shape is None:
        return None
    static = [d for d in t.shape if isinstance(d, int)]
    if any(d < 0 for d in static):
        return f"has a negative dim in {_dims(t.shape)}"
    count = 1
    for d in static:
        count *= d
        if count > MAX_ELEMENTS:
            return f"has the shape {_dims(t.shape)}: more elements than int64 counts"
    return None


def _dims(shape: tuple[Any, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _tensor_problem(tensor: Tensor) -> str | None:
    return data_problem(tensor)


def _sparse_problem(sparse: SparseTensor) -> str | None:
    for part, tensor in (("values", sparse.values), ("indices", sparse.indices)):
        problem = _tensor_problem(tensor)
        if problem:
            return f"{part} {problem}"
    if any(d < 0 for d in sparse.dims):
        return f"has a negative dim in {list(sparse.dims)}"
    dense = 1
    for d in sparse.dims:
        dense *= d
    if dense > MAX_ELEMENTS:
        return f"has dims {list(sparse.dims)}: more elements than int64 counts"
    nnz = sparse.values.size
    if len(sparse.values.shape) != 1:
        return f"values have the shape {list(sparse.values.shape)}, not [NNZ]"
    if sparse.indices.dtype != DType.INT64:
        return "indices are not int64"
    shape = sparse.indices.shape
    if shape not in ((nnz,), (nnz, len(sparse.dims))):
        return f"indices have the shape {list(shape)}; {nnz} values need [{nnz}] or [{nnz}, rank]"
    indices = sparse.indices.numpy()
    if indices.size:
        limits = [dense] if len(shape) == 1 else list(sparse.dims)
        lowest = int(indices.min())
        if lowest < 0 or any(
            int(indices.reshape(len(indices), -1)[:, i].max()) >= limit
            for i, limit in enumerate(limits)
        ):
            return f"has indices outside its dims {list(sparse.dims)}"
    return None


# -- one op -------------------------------------------------------------------------------------
def _kind(value: Any) -> int | None:
    """The AttributeProto type of an attribute value as read; None for no value, 0 for an
    empty list (any list kind)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return 2
    if isinstance(value, float):
        return 1
    if isinstance(value, str | bytes):
        return 3
    if isinstance(value, Tensor):
        return 4
    if isinstance(value, Graph):
        return 5
    if isinstance(value, SparseTensor):
        return 11
    if isinstance(value, OpaqueType | TensorType):
        return 13
    if isinstance(value, list | tuple):
        if not value:
            return 0
        single = _kind(value[0])
        return None if single is None else _LIST_OF.get(single)
    return None


_OP_MEMO: dict[tuple[Any, ...], tuple[str, ...]] = {}
"""The problems of ops by signature: the thousand identical layers of a large model are
checked once (a 100k-op graph spent 0.9 s here, op by op)."""


def _signature(op: Op, opsets: dict[str, int]) -> tuple[Any, ...] | None:
    """What decides _op_problems for an op without tensors, graphs or references in its
    attributes: kind, version, arity, the attributes' kinds (and element-type values)."""
    items = []
    for name, value in op.attrs.items():
        if value is None or isinstance(value, Tensor | Graph | SparseTensor | AttrRef):
            return None
        if (  # a list attribute holds one kind: its first element says which
            isinstance(value, list)
            and value
            and isinstance(value[0], Tensor | Graph | SparseTensor | AttrRef)
        ):
            return None
        items.append((name, _kind(value), value if name in _DTYPE_ATTRIBUTES else None))
    attributes = _source_attributes(op)
    if attributes is not None and len(attributes) != len(op.attrs):
        return None  # an attribute set twice: the message names it
    return (
        op.op_type,
        op.domain,
        op.overload,
        _opset_of(opsets, op.domain),
        len(op._inputs),
        len(op._outputs),
        tuple(items),
    )


def _source_attributes(op: Op) -> Any:
    """The attributes of the node ``op`` was read from, when it has attributes (an op read
    from a node without any has none; not asking spares upb a stub per node, see
    io._convert.set_fields)."""
    return getattr(op._source, "attribute", None) if op.attrs else None


def _op_problems(
    op: Op, opsets: dict[str, int], local: dict[tuple[str, str, str], Any]
) -> list[str]:
    key = None if (op.domain, op.op_type, op.overload) in local else _signature(op, opsets)
    if key is not None:
        known = _OP_MEMO.get(key)
        if known is not None:
            return list(known)
    found = _check_op(op, opsets, local)
    if key is not None:
        if len(_OP_MEMO) > 100_000:
            _OP_MEMO.clear()
        _OP_MEMO[key] = tuple(found)
    return found


def _check_op(op: Op, opsets: dict[str, int], local: dict[tuple[str, str, str], Any]) -> list[str]:
    found: list[str] = []
    attributes = _source_attributes(op)
    if attributes is not None and len(attributes) > len(op.attrs):  # a name set twice
        names = [a.name for a in attributes]
        twice = sorted({n for n in names if names.count(n) > 1}) if len(names) < 1000 else []
        if len(names) >= 1000 and len(set(names)) != len(names):
            twice = ["(several)"]
        if twice:
            listed = ", ".join(repr(name) for name in twice[:5])
            found.append(f"sets the attribute {listed} more than once")
    for name, value in op.attrs.items():
        if isinstance(value, AttrRef):
            continue
        if value is None:
            found.append(f"attribute {name!r} has no value or an unknown type")
            continue
        for tensor in _tensors_in(value):
            problem = _tensor_problem(tensor)
            if problem:
                found.append(f"attribute {name!r}: tensor {problem}")
        if isinstance(value, SparseTensor):
            problem = _sparse_problem(value)
            if problem:
                found.append(f"attribute {name!r}: sparse tensor {problem}")
    function = local.get((op.domain, op.op_type, op.overload))
    if function is not None:
        return found + _call_problems(op, function)
    version = _opset_of(opsets, op.domain)
    if version is None:
        found.append(f"is in the domain {op.domain or 'ai.onnx'!r}, which is not imported")
        return found
    if op.domain not in _ONNX_DOMAINS:
        return found  # a custom op: only its runtime knows its schema
    shape = schemas.schema_shape(op.op_type, version, op.domain)
    if shape is None and schemas.runtime_defined(op.op_type, version, op.domain):
        return found  # onnxruntime's own LayerNormalization below opset 17: it runs them
    if shape is None:
        found.append(f"is no op of {op.domain or 'ai.onnx'} opset {version}")
        return found
    found += _schema_problems(op, shape)
    if not found:
        found += _dtype_problems(op)
        found += _body_problems(op, shape.since_version)
    return found


def _tensors_in(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, list) and value and isinstance(value[0], Tensor):
        yield from value  # a list attribute holds one kind (TENSORS; not a tree's INTS)


def _schema_problems(op: Op, shape: schemas.SchemaShape) -> list[str]:
    found = []
    label = f"{op.op_type}-{shape.since_version}"
    unknown = [name for name in op.attrs if name not in shape.attributes]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        names = ", ".join(repr(name) for name in unknown[:5])
        found.append(f"has attributes {label} does not define: {names}{more}")
    for name, (kind, required) in shape.attributes.items():
        value = op.attrs.get(name)
        if value is None:
            if required and name not in op.attrs:
                found.append(f"lacks the attribute {name!r}, which {label} requires")
            continue
        if isinstance(value, AttrRef):
            continue
        have = _kind(value)
        if have is None or (have != kind and not (have == 0 and kind in _LIST_OF.values())):
            what = _KIND_NAMES.get(have or -1, "a value of no ONNX kind")
            found.append(f"attribute {name!r} is {what}; {label} takes {_KIND_NAMES[kind]}")
    n_in, n_out = len(op._inputs), len(op._outputs)
    if not shape.min_input <= n_in <= shape.max_input:
        takes = _range(shape.min_input, shape.max_input)
        found.append(f"has {n_in} inputs; {label} takes {takes}")
    if not shape.min_output <= n_out <= shape.max_output:
        found.append(
            f"has {n_out} outputs; {label} has {_range(shape.min_output, shape.max_output)}"
        )
    return found


def _range(low: int, high: int) -> str:
    if low == high:
        return str(low)
    return f"{low} or more" if high >= (1 << 31) - 1 else f"{low} to {high}"


def _dtype_problems(op: Op) -> list[str]:
    found = []
    for name in _DTYPE_ATTRIBUTES & set(op.attrs):
        value = op.attrs[name]
        if not isinstance(value, int) or (value == 0 and name in _MAY_BE_ZERO):
            continue
        if value not in DType._value2member_map_ or value == DType.UNDEFINED:
            found.append(f"attribute {name!r} is {value}, no ONNX element type")
    return found


def _body_problems(op: Op, since: int) -> list[str]:
    """Bodies whose inputs and outputs do not line up with the op's (If, Loop, Scan)."""
    n_in, n_out = len(op._inputs), len(op._outputs)
    if op.op_type == "If":
        return [
            f"{name} has {len(body.outputs)} outputs; the If has {n_out}"
            for name in ("then_branch", "else_branch")
            if isinstance(body := op.attrs.get(name), Graph) and len(body.outputs) != n_out
        ]
    body = op.attrs.get("body")
    if not isinstance(body, Graph):
        return []
    if op.op_type == "Loop":
        wanted_in, wanted_out = n_in, n_out + 1  # (iteration, cond, carried) -> (cond, ...)
    elif op.op_type == "Scan":
        wanted_in, wanted_out = n_in - (1 if since < 9 else 0), n_out
    else:
        return []
    found = []
    if len(body.inputs) != wanted_in:
        found.append(f"body has {len(body.inputs)} inputs; it needs {wanted_in}")
    if len(body.outputs) != wanted_out:
        found.append(f"body has {len(body.outputs)} outputs; it needs {wanted_out}")
    return found


def _call_problems(op: Op, function: Any) -> list[str]:
    found = []
    params = function.graph
    if len(op._inputs) > len(params.inputs):
        found.append(f"passes {len(op._inputs)} inputs; the function takes {len(params.inputs)}")
    if len(op._outputs) > len(params.outputs):
        found.append(f"takes {len(op._outputs)} outputs; the function has {len(params.outputs)}")
    return found


def _recursion_problems(model: Model) -> list[str]:
    """Local functions that call themselves, directly or through others."""
    keys = {fn.key: fn for fn in model.functions}
    calls: dict[tuple[str, str, str], set[tuple[str, str, str]]] = {}
    for fn in model.functions:
        calls[fn.key] = {
            (op.domain, op.op_type, op.overload)
            for graph in walk_graphs(fn.graph)
            for op in graph._ops
            if (op.domain, op.op_type, op.overload) in keys
        }
    found = []
    state: dict[tuple[str, str, str], int] = {}  # 1 on the stack, 2 done
    for start, callees in calls.items():
        if state.get(start):
            continue
        stack = [(start, iter(sorted(callees)))]
        state[start] = 1
        while stack:
            key, pending = stack[-1]
            nxt = next(pending, None)
            if nxt is None:
                state[key] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycle = [k for k, _ in stack][[k for k, _ in stack].index(nxt) :]
                names = " -> ".join(f"{d}::{n}" for d, n, _ in [*cycle, nxt])
                found.append(f"local functions call themselves: {names}")
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(calls[nxt]))))
    return found
