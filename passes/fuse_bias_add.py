"""fuse-bias-add: a constant Add after a Conv, ConvTranspose or Gemm becomes its bias."""

from __future__ import annotations

__all__ = ["FuseBiasAddPass"]

import logging
from typing import ClassVar

import numpy as np

from onnxforge.ir import Graph, Model, Op, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    bypass,
    constant,
    graphs_with_opset,
    inferred_types,
    only_reader,
    output_name,
    refresh_captures,
    set_input,
    shape_of,
    since,
)
from onnxforge.passes._worklist import visit
from onnxforge.passes.fuse_batchnorm_into_conv import FLOATS, replace_weight

logger = logging.getLogger(__name__)


@register_pass
class FuseBiasAddPass(Pass):
    """Fold ``z = Add(y, c)`` (either order) with a constant c into the op computing y.

    1. y = Conv/ConvTranspose(x, W[, b]) and c is the same for all positions of an output
       channel: every dim of c (aligned right with y's rank, W's rank) is 1 except the
       channel dim, which is 1 or M. The bias becomes ``b + c`` per channel.
    2. y = Gemm(A, B[, C]) (from opset 7; C constant or absent) and c broadcasts to y's
       static shape [M, N] without changing it. C becomes ``beta * C + c`` and beta 1;
       without C, c itself becomes C.

    Sums are computed in float64 and cast to the weight's dtype. y must be read by the Add
    alone; the Add from opset 7 (no legacy broadcast attribute).
    """

    name: ClassVar[str] = "fuse-bias-add"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Fold an Add of a constant into the bias of the Conv, ConvTranspose or Gemm before it."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        with inferred_types(model):
            for graph, opset in graphs_with_opset(model):
                for op in visit(graph, self.focus):
                    if op.op_type != "Add" or op._graph is not graph or len(op._inputs) != 2:
                        continue
                    if (since(op, opset) or 0) < 7:
                        continue
                    label = node_label(op)
                    for port in (0, 1):
                        kind = self._fuse(graph, op, port, opset)
                        if kind:
                            result.note(f"fused_into_{kind}", label)
                            break
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    def _fuse(self, graph: Graph, add: Op, port: int, opset: int) -> str | None:
        y, c_value = add._inputs[port], add._inputs[1 - port]
        c = constant(c_value)
        producer = graph.producer(y) if y is not None else None
        if c is None or producer is None or producer.domain not in STANDARD_DOMAINS:
            return None
        if not only_reader(graph, y, add) or c.dtype.char not in FLOATS:
            return None
        assert y is not None and c_value is not None
        if producer.op_type in ("Conv", "ConvTranspose") and _into_conv(graph, producer, c):
            bypass(graph, add, y)
            return "conv"
        if (
            producer.op_type == "Gemm"
            and (since(producer, opset) or 0) >= 7
            and _into_gemm(graph, producer, c, c_value, shape_of(y))
        ):
            bypass(graph, add, y)
            return "gemm"
        return None


def _into_conv(graph: Graph, conv: Op, c: np.ndarray) -> bool:
    """Case 1."""
    w = constant(conv._inputs[1])
    if w is None or w.dtype != c.dtype or c.ndim > w.ndim:
        return False
    channels = w.shape[0] if conv.op_type == "Conv" else w.shape[1] * int(conv.attr("group", 1))
    aligned = (1,) * (w.ndim - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(aligned) if i != 1) or aligned[1] not in (1, channels):
        return False
    bias_value = conv._inputs[2] if len(conv._inputs) > 2 else None
    bias = constant(bias_value) if bias_value is not None else np.zeros(channels, w.dtype)
    if bias is None or bias.shape != (channels,):
        return False
    per_channel = np.broadcast_to(c.reshape(aligned[1]).astype(np.float64), (channels,))
    fused = (bias.astype(np.float64) + per_channel).astype(w.dtype)
    replace_weight(graph, conv, 2, fused, base=f"{output_name(conv)}_bias")
    return True


def _into_gemm(
    graph: Graph, gemm: Op, c: np.ndarray, c_value: Value, shape: tuple[object, ...] | None
) -> bool:
    """Case 2."""
    if shape is None or len(shape) != 2 or c.ndim > 2:
        return False
    if not all(n in (1, d) for n, d in zip(c.shape[::-1], shape[::-1], strict=False)):
        return False  # c would change the output's shape, or the dim is not known
    old_value = gemm._inputs[2] if len(gemm._inputs) > 2 else None
    beta = float(gemm.attr("beta", 1.0))
    if old_value is None:
        set_input(graph, gemm, 2, c_value)
        gemm.attrs["beta"] = 1.0
        return True
    old = constant(old_value)
    if old is None or old.dtype != c.dtype or old.ndim > 2:
        return False
    if not all(n in (1, d) for n, d in zip(old.shape[::-1], shape[::-1], strict=False)):
        return False
    fused = beta * old.astype(np.float64) + c.astype(np.float64)
    replace_weight(graph, gemm, 2, fused.astype(c.dtype), base=f"{output_name(gemm)}_bias")
    gemm.attrs["beta"] = 1.0
    return True
