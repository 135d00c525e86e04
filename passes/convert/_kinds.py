"""Generic kinds of version adapter, as registration helpers: compatible, attribute <-> input,
remove attribute, type restriction; and the node edits they share with bespoke adapters."""

from __future__ import annotations

__all__ = [
    "ARITHMETIC_WIDENING",
    "VALUE_WIDENING",
    "attribute_to_input",
    "compatible",
    "discard_if_unused",
    "drop_input",
    "input_to_attribute",
    "move_attribute_to_input",
    "move_input_to_attribute",
    "put_input",
    "remove_attribute",
    "restrict_types",
    "type_restriction",
]

import logging
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from onnxforge import opset as schemas
from onnxforge.ir import DType, Graph, Op, TensorType, Value, dtype_name
from onnxforge.passes.convert._registry import Adapter, ConvertContext, adapter

logger = logging.getLogger(__name__)

_I8, _U8, _I16, _U16 = DType.INT8, DType.UINT8, DType.INT16, DType.UINT16
_I32, _U32, _I64, _U64 = DType.INT32, DType.UINT32, DType.INT64, DType.UINT64
_F16, _BF16, _F32, _F64 = DType.FLOAT16, DType.BFLOAT16, DType.FLOAT, DType.DOUBLE

ARITHMETIC_WIDENING: Mapping[int, tuple[int, ...]] = {
    _I8: (_I16, _I32, _I64),
    _U8: (_U16, _U32, _U64),
    _I16: (_I32, _I64),
    _U16: (_U32, _U64),
    _I32: (_I64,),
    _U32: (_U64,),
    _F16: (_F32, _F64),
    _BF16: (_F32, _F64),
}
"""Types an arithmetic op may compute in instead, best first: a wider integer of the same
signedness (Cast back keeps the low bits, so +, -, * and / wrap exactly as in the narrow type)
or a wider float (rounded once on the way back, as runtimes compute float16/bfloat16)."""

VALUE_WIDENING: Mapping[int, tuple[int, ...]] = {
    **ARITHMETIC_WIDENING,
    DType.BOOL: (_F16, _F32, _F64, _U8, _I8, _I32, _I64),
    _I8: (*ARITHMETIC_WIDENING[_I8], _F16, _F32, _F64),
    _U8: (*ARITHMETIC_WIDENING[_U8], _I16, _I32, _I64, _F16, _F32, _F64),
    _I16: (*ARITHMETIC_WIDENING[_I16], _F32, _F64),
    _U16: (*ARITHMETIC_WIDENING[_U16], _I32, _I64, _F32, _F64),
    _I32: (_I64, _F64),
    _U32: (_U64, _I64, _F64),
}
"""Types an op that only moves values (Split, Concat, ...) may carry them in: every value of
the source type survives the Cast there and back exactly."""


def _named(fn: Adapter, name: str) -> Adapter:
    fn.__name__ = fn.__qualname__ = name
    return fn


# -- node edits ------------------------------------------------------------------------------
def put_input(graph: Graph, op: Op, index: int, value: Value | None) -> None:
    """Set input ``index`` of ``op``, appending omitted inputs before it as needed."""
    while len(op._inputs) <= index:
        op._inputs.append(None)
    graph.set_input(op, index, value)


def drop_input(graph: Graph, op: Op, index: int) -> None:
    """Omit input ``index`` (trailing omitted inputs are removed); an initializer or Constant
    that nothing reads any more goes too."""
    if index >= len(op._inputs):
        return
    old = op._inputs[index]
    graph.set_input(op, index, None)
    while op._inputs and op._inputs[-1] is None:
        op._inputs.pop()
    discard_if_unused(graph, old)


def discard_if_unused(graph: Graph, value: Value | None) -> None:
    """Remove ``value`` when it is an initializer or a Constant's output nothing reads."""
    if value is None or value.graph is not graph or graph.is_used(value):
        return
    if value in graph.inputs:
        return
    producer = graph.producer(value)
    if value.const is not None:
        graph.remove_initializer(value)
    elif producer is not None and producer.op_type == "Constant":
        graph.remove_op(producer)


def move_attribute_to_input(
    op: Op, graph: Graph, ctx: ConvertContext, *, attr: str, index: int, dtype: int
) -> None:
    """Attribute ``attr`` becomes input ``index``: a new initializer of ``dtype`` under a
    name unused in the model. Nothing to do when the attribute is absent."""
    value = op.attrs.pop(attr, None)
    if value is None:
        return
    np_dtype = DType(dtype).numpy
    array = np.asarray(value, dtype=np_dtype)
    base = f"{op.name or op.op_type.lower()}_{attr}"
    put_input(graph, op, index, ctx.add_constant(graph, base, array))


def move_input_to_attribute(
    op: Op,
    graph: Graph,
    ctx: ConvertContext,
    *,
    attr: str,
    index: int,
    as_type: type[int] | type[float] = int,
) -> None:
    """Input ``index`` becomes attribute ``attr`` (ints or floats); the input must be known
    without running the model (an initializer, a Constant, or computed by shape inference)."""
    inputs = graph.inputs_of(op)
    value = inputs[index] if index < len(inputs) else None
    if value is None:
        return
    data = ctx.const(graph, value)
    target = f"{op.op_type}-{schemas.since_version(op.op_type, ctx.to_opset, op.domain)}"
    if data is None:
        raise ctx.fail(
            op,
            f"input {index} ({value.name!r}) is computed at run time, but {target} takes "
            f"{attr!r} as an attribute: it must be a constant",
        )
    flat = np.asarray(data).reshape(-1)
    if as_type is int:
        if flat.dtype.kind == "f" and not np.all(flat == np.round(flat)):
            raise ctx.fail(op, f"input {index} holds non-integers {flat.tolist()}")
        op.attrs[attr] = [int(v) for v in flat]
    else:
        op.attrs[attr] = [float(v) for v in flat]
    drop_input(graph, op, index)


def _castable(src: int, dst: int, opset: int) -> bool:
    """A Cast of the schema ``opset`` selects converts src -> dst and back."""
    since = schemas.since_version("Cast", opset)
    t1 = schemas.allowed_types("Cast", since, "T1")
    t2 = schemas.allowed_types("Cast", since, "T2")
    return src in t1 and dst in t2 and dst in t1 and src in t2


def _cast(graph: Graph, value: Value, dtype: int, opset: int, shape: object) -> Value:
    """A Cast of ``value`` to ``dtype`` valid at ``opset`` (Cast-1 names the type)."""
    to: int | str = DType(dtype).name if opset < 6 else int(dtype)
    op = graph.add_op("Cast", [value], name=graph.fresh_name(f"{value.name}_cast"), to=to)
    (out,) = graph.outputs_of(op)
    assert out is not None
    out.type = TensorType(dtype, shape)  # type: ignore[arg-type]
    return out


def _cast_back(graph: Graph, value: Value, dtype: int, opset: int) -> None:
    """``value`` (an op's output) is computed in another type from now on: a Cast to
    ``dtype`` takes its name, its uses and its type."""
    to: int | str = DType(dtype).name if opset < 6 else int(dtype)
    old_type = value.type
    cast = graph.add_op("Cast", [None], name=graph.fresh_name(f"{value.name}_cast"), to=to)
    (out,) = graph.outputs_of(cast)
    assert out is not None
    graph.replace_all_uses(value, out)
    graph.set_input(cast, 0, value)
    value.name, out.name = out.name, value.name
    out.type = old_type


def restrict_types(
    op: Op,
    graph: Graph,
    ctx: ConvertContext,
    *,
    param: str = "T",
    inputs: Sequence[int] | None = None,
    outputs: Sequence[int] | None = None,
    widening: Mapping[int, tuple[int, ...]] = ARITHMETIC_WIDENING,
) -> None:
    """The target schema's type constraint ``param`` may lack the element type of ``inputs``
    (all by default): an error, or with ``ctx.allow_cast`` a Cast of those inputs to the first
    type of ``widening`` the target takes, and a Cast of ``outputs`` (all by default) back."""
    since = schemas.since_version(op.op_type, ctx.to_opset, op.domain)
    allowed = schemas.allowed_types(op.op_type, since, param, op.domain)
    ports = range(len(op._inputs)) if inputs is None else inputs
    values = [op._inputs[i] for i in ports if i < len(op._inputs)]
    bad = {t.dtype for v in values if (t := ctx.type(v)) is not None and t.dtype not in allowed}
    if not bad:
        return
    dtype = min(bad)
    target = f"{op.op_type}-{since}"
    name = dtype_name(dtype).lower()
    if not ctx.allow_cast:
        raise ctx.fail(
            op, f"{target} does not take {name}; allow_cast (--allow-cast) casts around the node"
        )
    wide = next(
        (w for w in widening.get(dtype, ()) if w in allowed and _castable(dtype, w, ctx.to_opset)),
        None,
    )
    if wide is None:
        raise ctx.fail(
            op,
            f"{target} does not take {name}, and takes no type that holds every {name} result "
            f"exactly and that Cast at opset {ctx.to_opset} converts to and from",
        )
    casts: dict[Value, Value] = {}
    for i in ports:
        value = op._inputs[i] if i < len(op._inputs) else None
        if value is None:
            continue
        if value not in casts:
            t = ctx.type(value)
            casts[value] = _cast(graph, value, wide, ctx.to_opset, t.shape if t else None)
        graph.set_input(op, i, casts[value])
    out_ports = range(len(op._outputs)) if outputs is None else outputs
    for j in out_ports:
        out = op._outputs[j] if j < len(op._outputs) else None
        if out is None:
            continue
        t = out.type if isinstance(out.type, TensorType) else None
        _cast_back(graph, out, dtype, ctx.to_opset)
        out.type = TensorType(wide, t.shape if t else None)
    logger.info("%s: computed in %s instead of %s", op.describe(), dtype_name(wide), name)


# -- registration helpers --------------------------------------------------------------------
def _keep() -> Adapter:
    def keep(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        """Nothing to change."""

    return keep


def compatible(op_types: str | Iterable[str], a: int, b: int) -> None:
    """The schema changes on the step a <-> b, but every node stays valid and means the same:
    accepted as it is, both ways."""

    keep = _named(_keep(), "compatible")
    adapter(op_types, a, b)(keep)
    adapter(op_types, b, a)(keep)


def attribute_to_input(
    op_types: str | Iterable[str], a: int, b: int, *, attr: str, index: int, dtype: int
) -> Adapter:
    """On the step a -> b attribute ``attr`` becomes input ``index`` (an initializer)."""

    def to_input(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        move_attribute_to_input(op, graph, ctx, attr=attr, index=index, dtype=dtype)

    return adapter(op_types, a, b)(_named(to_input, f"attribute_to_input({attr})"))


def input_to_attribute(
    op_types: str | Iterable[str],
    a: int,
    b: int,
    *,
    attr: str,
    index: int,
    as_type: type[int] | type[float] = int,
) -> Adapter:
    """On the step a -> b input ``index`` becomes attribute ``attr``; the input must be a
    constant or computable by shape inference, else the node is refused."""

    def to_attribute(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        move_input_to_attribute(op, graph, ctx, attr=attr, index=index, as_type=as_type)

    return adapter(op_types, a, b)(_named(to_attribute, f"input_to_attribute({attr})"))


def remove_attribute(
    op_types: str | Iterable[str], a: int, b: int, *, attr: str, default: object = None
) -> Adapter:
    """On the step a -> b attribute ``attr`` disappears. With ``default``, a node setting
    another value is refused (the target cannot express it); without, it is dropped."""

    def remove(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        value = op.attrs.get(attr)
        if value is not None and default is not None and value != default:
            target = schemas.since_version(op.op_type, ctx.to_opset, op.domain)
            raise ctx.fail(op, f"{op.op_type}-{target} has no {attr}; this node sets {value}")
        op.attrs.pop(attr, None)

    return adapter(op_types, a, b)(_named(remove, f"remove_attribute({attr})"))


def type_restriction(
    op_types: str | Iterable[str],
    a: int,
    b: int,
    *,
    param: str = "T",
    inputs: Sequence[int] | None = None,
    outputs: Sequence[int] | None = None,
    widening: Mapping[int, tuple[int, ...]] = ARITHMETIC_WIDENING,
    reverse: bool = True,
) -> Adapter:
    """On the step a -> b the type constraint ``param`` loses element types: a node using one
    is refused, or with allow_cast computed in a wider type (see ``restrict_types``). With
    ``reverse`` the step b -> a, which only gains types, is accepted as it is."""

    def restrict(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        restrict_types(
            op, graph, ctx, param=param, inputs=inputs, outputs=outputs, widening=widening
        )

    if reverse:
        adapter(op_types, b, a)(_named(_keep(), "compatible"))
    return adapter(op_types, a, b)(_named(restrict, "type_restriction"))
