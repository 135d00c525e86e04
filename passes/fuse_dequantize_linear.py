"""fuse-dequantize-linear: an integer weight cast to float, less a zero point, times a scale
becomes one DequantizeLinear (the weight stays integer: no file growth, fewer ops)."""

from __future__ import annotations

__all__ = ["FuseDequantizeLinearPass"]

import logging
from collections.abc import Iterator
from typing import ClassVar

import ml_dtypes
import numpy as np

from onnxforge import opset as schemas
from onnxforge.ir import DType, Graph, Model, Op, Tensor, Value, constant_tensor, walk_graphs
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    constant,
    graphs_with_opset,
    only_reader,
    output_name,
    producer_of,
    refresh_captures,
    rename,
    set_input,
)
from onnxforge.passes._worklist import neighbours, visit

logger = logging.getLogger(__name__)

ZERO_POINTS: dict[int, tuple[int, int]] = {
    DType.INT8: (-128, 127),
    DType.UINT8: (0, 255),
    DType.INT16: (-32768, 32767),
    DType.UINT16: (0, 65535),
    DType.INT4: (-8, 7),
    DType.UINT4: (0, 15),
    DType.INT32: (0, 0),
}
"""The weight types rewritten and the zero points each takes. Up to 16 bits, x - zp is exact
in float32, so DequantizeLinear's ``float(x - zp) * scale`` is bitwise the pattern's
``(float(x) - float(zp)) * scale``; int32 only without a zero point (the schema's rule, and
the difference could round). Which of them the model's opset allows, and whether it has
``axis``, is the DequantizeLinear schema's say (``opset.node_problem``)."""
PACKED: dict[int, np.dtype] = {
    DType.INT4: np.dtype(ml_dtypes.int4),
    DType.UINT4: np.dtype(ml_dtypes.uint4),
}
"""numpy dtypes of the weight types ``DType.numpy`` has none for (4-bit, packed in files)."""
PER_TENSOR = -1


@register_pass
class FuseDequantizeLinearPass(Pass):
    """Replace ``y = Mul(Cast(x), s)`` and ``y = Mul(Sub(Cast(x), zp), s)`` (s on either side)
    by ``y = DequantizeLinear(x, s[, zp])`` when x is a constant weight.

    1. x is a constant (initializer or Constant) of a type in ZERO_POINTS and the Cast makes
       float32; s is a float32 constant.
    2. zp is a float32 constant, or the Cast to float32 of a constant; its values are
       integers in x's type's range (ZERO_POINTS). It becomes a constant of x's type; a zp of
       all zeros is left out.
    3. s and zp broadcast to x's shape without changing it (aligned right, every dim 1 or
       x's). Each has one element (per tensor: a scalar in the rewrite) or one dim that is
       not 1, at axis a (per axis: a 1-D tensor of x.shape[a] and ``axis=a``; the other of
       the two, if per tensor, is repeated along it). Two axes, or more than one varying
       dim (blocks): left.
    4. The model's opset has DequantizeLinear for x's type, with ``axis`` when per axis
       (10-12: per tensor only; int16, uint16, int4, uint4 from 21); below 10 nothing.
    The Cast's and the Sub's outputs must be read by the next op of the pattern alone (no
    other reader, no graph output). The Mul becomes the DequantizeLinear, so y keeps its name;
    the Cast and Sub go, and so do constants nothing reads any more. fold-constants never
    folds a DequantizeLinear (its QUANTIZATION rule), so the weight stays integer. (onnxruntime
    1.31 with graph optimizations runs an 8-bit DequantizeLinear -> MatMul as MatMulNBits with
    int8 activations, about 0.5% off float32; without them it computes the same bits.)
    """

    name: ClassVar[str] = "fuse-dequantize-linear"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Replace Mul(Sub(Cast(integer weight), zero point), scale) by DequantizeLinear."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        bodies = {g for fn in model.functions for g in walk_graphs(fn.graph)}
        for graph, opset in graphs_with_opset(model):
            if opset < 10:
                continue  # no DequantizeLinear
            for op in visit(graph, self.focus, near=_near_chain):
                if op.op_type != "Mul" or op.domain not in STANDARD_DOMAINS:
                    continue
                if op._graph is not graph or len(op._inputs) != 2 or len(op._outputs) != 1:
                    continue
                label = node_label(op)
                for port in (0, 1):
                    kind = _fuse(graph, op, port, opset, as_ops=graph in bodies)
                    if kind:
                        result.note(kind, label)
                        break
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result


def _fuse(graph: Graph, mul: Op, port: int, opset: int, *, as_ops: bool) -> str | None:
    """Rewrite the pattern ending at ``mul`` whose Cast or Sub is at ``port``: "per_tensor"
    or "per_axis", or None when it is not there or not rewritten. ``as_ops``: new constants
    are Constant ops (a local function holds no initializers)."""
    found = _match(graph, mul, port)
    if found is None:
        return None
    cast, sub = found
    x_value, s_value = cast._inputs[0], mul._inputs[1 - port]
    zp_value = sub._inputs[1] if sub is not None else None
    x, scale = _tensor(x_value), constant(s_value)
    if x is None or x.dtype not in ZERO_POINTS or x.size == 0:
        return None  # Case 1
    if scale is None or scale.dtype != np.float32:
        return None
    zp = _zero_point(graph, zp_value, x.dtype) if sub is not None else None
    if sub is not None and zp is None:
        return None
    # Case 3
    layouts = [_layout(a.shape, x.shape) for a in (scale, zp) if a is not None]
    axes = {a for a in layouts if a is not None and a != PER_TENSOR}
    if None in layouts or len(axes) > 1:
        return None
    axis = axes.pop() if axes else PER_TENSOR
    if zp is not None and not zp.any():
        zp = None  # all zeros: DequantizeLinear's default
    # Case 4
    dtypes: list[int | None] = [x.dtype, DType.FLOAT]
    if zp is not None:
        dtypes.append(x.dtype)  # the zero point
    problem = schemas.node_problem(
        "DequantizeLinear",
        opset,
        attrs=set() if axis == PER_TENSOR else {"axis"},
        n_inputs=2 if zp is None else 3,
        n_outputs=1,
        input_dtypes=dtypes,
        output_dtypes=[DType.FLOAT],
    )
    if problem is not None:
        logger.debug("%s: left at opset %d: %s", node_label(mul), opset, problem)
        return None
    shape = () if axis == PER_TENSOR else (int(x.shape[axis]),)
    base = output_name(mul)
    operands = [
        x_value,
        _operand(graph, s_value, scale, shape=shape, dtype=DType.FLOAT, base=base, as_op=as_ops),
    ]
    sources = [s_value]
    if zp is not None:
        sources.append(_zero_point_source(graph, zp_value))
        operands.append(
            _operand(graph, sources[1], zp, shape=shape, dtype=x.dtype, base=base, as_op=as_ops)
        )
    for index, value in enumerate(operands):
        set_input(graph, mul, index, value)
    mul.op_type = "DequantizeLinear"
    mul.attrs = {} if axis == PER_TENSOR else {"axis": axis}
    graph.touch(mul)
    if sub is not None:
        graph.remove_op(sub)
    graph.remove_op(cast)
    for value in (s_value, zp_value):
        if value is not None:
            _drop_if_unread(graph, value)
    for old, new in zip(sources, operands[1:], strict=True):
        if old is not None and new is not old and old.graph is graph and old not in graph:
            rename(new, old.name)  # the constant it replaces is gone: no new name in the file
    return "per_tensor" if axis == PER_TENSOR else "per_axis"


def _match(graph: Graph, mul: Op, port: int) -> tuple[Op, Op | None] | None:
    """The Cast to float32 and the Sub (None without one) that compute ``mul``'s input at
    ``port``, each read by the next op alone; None when they are not there."""
    y = mul._inputs[port]
    sub = producer_of(graph, y, {"Sub"})
    if sub is not None:
        if len(sub._inputs) != 2 or not only_reader(graph, y, mul):
            return None
        y = sub._inputs[0]
    cast = producer_of(graph, y, {"Cast"})
    if cast is None or cast.attr("to") != DType.FLOAT or not cast._inputs:
        return None
    if not only_reader(graph, y, sub or mul):
        return None
    return cast, sub


def _tensor(value: Value | None) -> Tensor | None:
    """The constant ``value`` holds (see ``_rewrite.constant``), without reading its data."""
    if value is None:
        return None
    if isinstance(value.const, Tensor):
        owner = value.graph
        return None if owner is not None and value in owner.inputs else value.const
    op = value.graph.producer(value) if value.graph is not None else None
    if op is None or op.op_type != "Constant" or op.domain not in STANDARD_DOMAINS:
        return None
    return constant_tensor(op)


def _zero_point(graph: Graph, value: Value | None, dtype: int) -> np.ndarray | None:
    """Case 2: the zero point's values (int64), or None when they are not integers of x's
    type."""
    source = _zero_point_source(graph, value)
    values = constant(source)
    if values is None or values.size == 0:
        return None
    if source is value and values.dtype != np.float32:
        return None
    try:
        wide = values.astype(np.float64)  # ml_dtypes' int4 too
    except (TypeError, ValueError):
        return None
    low, high = ZERO_POINTS[dtype]
    if not np.all(np.isfinite(wide)) or np.any(wide != np.round(wide)):
        return None
    if np.any(wide < low) or np.any(wide > high):
        return None
    return wide.astype(np.int64)


def _zero_point_source(graph: Graph, value: Value | None) -> Value | None:
    """The constant behind a zero point: the input of a Cast to float32, else the value."""
    cast = producer_of(graph, value, {"Cast"})
    if cast is not None and cast.attr("to") == DType.FLOAT and cast._inputs:
        return cast._inputs[0]
    return value


def _layout(shape: tuple[int, ...], x_shape: tuple[int, ...]) -> int | None:
    """Case 3: PER_TENSOR for one value, the axis of x it varies along, or None when it
    would change x's shape or varies along more than one axis."""
    if len(shape) > len(x_shape):
        return None
    aligned = (1,) * (len(x_shape) - len(shape)) + tuple(shape)
    if any(n not in (1, d) for n, d in zip(aligned, x_shape, strict=True)):
        return None
    axes = [i for i, n in enumerate(aligned) if n != 1]
    if len(axes) > 1:
        return None
    return axes[0] if axes else PER_TENSOR


def _operand(
    graph: Graph,
    value: Value | None,
    array: np.ndarray,
    *,
    shape: tuple[int, ...],
    dtype: int,
    base: str,
    as_op: bool,
) -> Value:
    """``value`` when it is a constant of ``dtype`` and ``shape`` already (a shared scale
    stays shared), else a new constant holding ``array`` as that: an initializer, or with
    ``as_op`` a Constant op."""
    held = _tensor(value)
    if value is not None and held is not None and held.shape == shape and held.dtype == dtype:
        return value
    flat = np.broadcast_to(array.reshape(-1), shape or (1,)).reshape(shape)
    numpy_dtype = DType(dtype).numpy or PACKED[dtype]
    # np.require, not np.ascontiguousarray: that one turns a scalar into shape (1,).
    tensor = Tensor.from_numpy(np.require(flat.astype(numpy_dtype), requirements="C"), dtype)
    name = graph.fresh_name(f"{base}_{'scale' if dtype == DType.FLOAT else 'zero_point'}")
    if not as_op:
        return graph.add_initializer(name, tensor)
    (out,) = graph.add_op("Constant", [], output_names=[name], value=tensor)._outputs
    assert out is not None
    return out


def _drop_if_unread(graph: Graph, value: Value) -> None:
    """An initializer or Constant op of ``graph`` that nothing reads any more goes."""
    if value.graph is not graph or graph.is_used(value) or value in graph.outputs:
        return
    if value in graph.initializers and value not in graph.inputs:
        graph.remove_initializer(value)
        return
    op = graph.producer(value)
    if op is not None and op.op_type in ("Constant", "Cast") and op.domain in STANDARD_DOMAINS:
        source = op._inputs[0] if op._inputs else None
        graph.remove_op(op)
        if source is not None:
            _drop_if_unread(graph, source)  # the zero point's Cast: its constant


def _near_chain(graph: Graph, op: Op) -> Iterator[Op]:
    """Near a touched op: its neighbours and the readers of their readers (a Cast whose other
    reader went is two ops above its Mul when a Sub is between them)."""
    for near in neighbours(graph, op):
        yield near
        for value in near._outputs:
            if value is not None:
                for reader, _ in graph._uses.get(value, ()):
                    yield reader
