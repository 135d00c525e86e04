"""Constant adapters going down: value_* attributes (12) and sparse_value (11) become a
value tensor; a value whose type the older Constant lacks becomes an initializer, as does a
ConstantOfShape of a known shape below 9."""

from __future__ import annotations

__all__ = ["constant_down", "constant_of_shape_9_8"]

import numpy as np

from onnxforge.ir import Graph, Op, SparseTensor, Tensor, constant_tensor
from onnxforge.passes.convert._build import finish, known
from onnxforge.passes.convert._classify import structural_problem
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _function_body(graph: Graph) -> bool:
    """A function body (no initializers there): its root's inputs carry no types."""
    root = graph
    while root.parent is not None:
        root = root.parent
    return bool(root.inputs) and all(v.type is None for v in root.inputs)


@adapter("Constant", 12, 11)
@adapter("Constant", 11, 10)
@adapter("Constant", 9, 8)
@adapter("Constant", 13, 12)
@adapter("Constant", 19, 18)
@adapter("Constant", 21, 20)
@adapter("Constant", 23, 22)
@adapter("Constant", 24, 23)
@adapter("Constant", 25, 24)
def constant_down(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """value_int(s)/value_float(s) -> value (12 -> 11); sparse_value -> a dense value
    (11 -> 10). When the older Constant does not take the element type (int64 below 9,
    bfloat16 below 13, float8 below 19, ...), the value becomes an initializer, which no
    opset restricts (not in a function body, which has none)."""
    if any(k in op.attrs for k in ("value_int", "value_ints", "value_float", "value_floats")):
        tensor = constant_tensor(op)
        assert tensor is not None
        op.attrs = {"value": tensor}
    sparse = op.attrs.get("sparse_value")
    if isinstance(sparse, SparseTensor) and ctx.to_opset < 11:
        op.attrs = {"value": Tensor.from_numpy(np.ascontiguousarray(sparse.numpy()))}
    if structural_problem(op, graph, ctx) is not None and not _function_body(graph):
        tensor = constant_tensor(op)
        if tensor is not None:
            graph.make_constant(op, [tensor])
            return
    finish(op, graph, ctx)


@adapter("ConstantOfShape", 9, 8)
def constant_of_shape_9_8(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """No ConstantOfShape before 9: with a shape known at conversion time its tensor becomes
    an initializer (not in a function body)."""
    shape = known(graph, ctx, graph.inputs_of(op)[0])
    if shape is None or _function_body(graph):
        raise ctx.fail(op, "no ConstantOfShape before 9, and the shape is computed at run time")
    value = op.attr("value")
    fill = value.numpy().reshape(-1)[0] if isinstance(value, Tensor) else np.float32(0)
    array = np.full([int(d) for d in shape.reshape(-1)], fill, dtype=np.asarray(fill).dtype)
    graph.make_constant(op, [Tensor.from_numpy(array)])
