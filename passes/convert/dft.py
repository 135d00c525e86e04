"""DFT adapters at 20: the axis attribute (default 1) <-> input (default -2)."""

from __future__ import annotations

__all__ = ["dft_19_20", "dft_20_19"]

import numpy as np

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import add_input, finish, take_const
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("DFT", 19, 20)
def dft_19_20(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The axis (DFT-17's default 1 included: DFT-20's is -2) becomes a scalar input."""
    axis = int(op.attrs.pop("axis", 1))
    value = ctx.add_constant(graph, f"{op.name or 'dft'}_axis", np.array(axis, dtype=np.int64))
    add_input(graph, op, 2, value)
    finish(op, graph, ctx)


@adapter("DFT", 20, 19)
def dft_20_19(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant axis input (absent: -2) becomes the attribute."""
    inputs = graph.inputs_of(op)
    if len(inputs) > 2 and inputs[2] is not None:
        axis = take_const(graph, ctx, op, 2)
        if axis is None:
            raise ctx.fail(op, "the axis is computed at run time; DFT-17 takes an attribute")
        op.attrs["axis"] = int(axis.reshape(-1)[0])
    else:
        op.attrs["axis"] = -2
    finish(op, graph, ctx)
