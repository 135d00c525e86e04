"""Split adapters for every schema step (1, 2, 11, 13, 18), both ways.

- 1 <-> 2: Split-1's optional second input (float lengths) becomes the ``split`` attribute
  when it is constant; down, the attribute stays (Split-1 has it too) and the element type
  must be one of Split-1's floats (or, with allow_cast, a Cast pair that keeps every value).
- 2 <-> 11: a negative axis exists only from 11; down it is normalized with the inferred rank.
- 11 <-> 13: the ``split`` attribute <-> an int64 input (a new initializer; down it must be a
  constant or computable); bfloat16 exists only from 13.
- 13 <-> 18: without a split input Split-18 needs ``num_outputs`` (the number of outputs);
  down, ``num_outputs`` goes when the parts are equal, else the sizes (ceil-sized parts, the
  last smaller) come from the inferred dim as a split input.
"""

from __future__ import annotations

__all__ = [
    "split_1_2",
    "split_2_1",
    "split_10_11",
    "split_11_10",
    "split_13_12",
    "split_17_18",
    "split_18_17",
]

import numpy as np

from onnxforge.ir import DType, Graph, Op
from onnxforge.passes.convert._kinds import (
    VALUE_WIDENING,
    attribute_to_input,
    move_input_to_attribute,
    put_input,
    restrict_types,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter
from onnxforge.shape_infer.symbolic import parse


@adapter("Split", 1, 2)
def split_1_2(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Split-1's lengths input becomes the ``split`` attribute (it must be constant)."""
    inputs = graph.inputs_of(op)
    if len(inputs) > 1 and inputs[1] is not None and op.attr("split") is not None:
        raise ctx.fail(op, "split is given both as attribute and as input")
    move_input_to_attribute(op, graph, ctx, attr="split", index=1, as_type=int)


@adapter("Split", 2, 1)
def split_2_1(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Split-1 splits only float, double and float16 tensors."""
    restrict_types(op, graph, ctx, inputs=(0,), widening=VALUE_WIDENING)


@adapter("Split", 10, 11)
def split_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Split-11 only adds negative axes: nothing to change."""


@adapter("Split", 11, 10)
def split_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A negative axis counts from the back with the inferred rank."""
    axis = op.attr("axis", 0)
    if axis >= 0:
        return
    t = ctx.type(graph.inputs_of(op)[0])
    if t is None or t.rank is None:
        raise ctx.fail(op, f"axis {axis} is negative and the input's rank is unknown")
    if axis < -t.rank:
        raise ctx.fail(op, f"axis {axis} is outside [-{t.rank}, {t.rank - 1}]")
    op.attrs["axis"] = axis + t.rank


attribute_to_input("Split", 12, 13, attr="split", index=1, dtype=DType.INT64)


@adapter("Split", 13, 12)
def split_13_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The split input becomes the attribute (it must be constant or computable); Split-11
    has no bfloat16."""
    restrict_types(op, graph, ctx, inputs=(0,), widening=VALUE_WIDENING)
    move_input_to_attribute(op, graph, ctx, attr="split", index=1, as_type=int)


@adapter("Split", 17, 18)
def split_17_18(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Without a split input Split-18 needs ``num_outputs``: the number of outputs."""
    inputs = graph.inputs_of(op)
    if op.attr("num_outputs") is None and (len(inputs) < 2 or inputs[1] is None):
        op.attrs["num_outputs"] = len(graph.outputs_of(op))


@adapter("Split", 18, 17)
def split_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """``num_outputs`` goes; unequal parts become a split input computed from the dim."""
    count = op.attr("num_outputs")
    if count is None:
        return
    inputs = graph.inputs_of(op)
    n_outputs = len(graph.outputs_of(op))
    if len(inputs) > 1 and inputs[1] is not None:
        raise ctx.fail(op, f"both the split input and num_outputs ({count}) are given")
    if count != n_outputs:
        raise ctx.fail(op, f"num_outputs is {count}, but the node has {n_outputs} outputs")
    dim = _split_dim(op, graph, ctx)
    if _divides(count, dim):
        del op.attrs["num_outputs"]
        return
    if not isinstance(dim, int):
        shown = "unknown" if dim is None else dim
        raise ctx.fail(
            op,
            f"the split dim is {shown}, so the {count} parts of num_outputs may be unequal, "
            "and Split-13 needs their sizes",
        )
    size = -(-dim // count)
    last = dim - size * (count - 1)
    if last < 0:
        raise ctx.fail(op, f"dim {dim} does not split into {count} parts of {size}")
    sizes = np.array([size] * (count - 1) + [last], dtype=np.int64)
    del op.attrs["num_outputs"]
    base = f"{op.name or 'split'}_split"
    put_input(graph, op, 1, ctx.add_constant(graph, base, sizes))


def _split_dim(op: Op, graph: Graph, ctx: ConvertContext) -> int | str | None:
    """The inferred length of the split axis, or None."""
    t = ctx.type(graph.inputs_of(op)[0])
    if t is None or t.shape is None:
        return None
    axis = op.attr("axis", 0)
    if not -len(t.shape) <= axis < len(t.shape):
        raise ctx.fail(op, f"axis {axis} is outside the input's rank {len(t.shape)}")
    return t.shape[axis]


def _divides(count: int, dim: int | str | None) -> bool:
    """``dim`` is provably a multiple of ``count`` (a symbolic dim: every coefficient is)."""
    if count == 1:
        return True
    if isinstance(dim, int):
        return dim % count == 0
    if dim is None:
        return False
    return parse(dim).divide_exactly(count) is not None
