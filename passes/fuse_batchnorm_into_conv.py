"""fuse-batchnorm-into-conv and fuse-mul-into-conv: an inference BatchNormalization, or a Mul
by a per-channel constant, after a Conv or ConvTranspose with constant weights becomes part of
the weights and bias (a per-channel Add after it is fuse-bias-add's)."""

from __future__ import annotations

__all__ = ["FuseBatchNormIntoConvPass", "FuseMulIntoConvPass", "replace_weight"]

import logging
from typing import ClassVar

import numpy as np

from onnxforge.ir import Graph, Model, Op, Tensor, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    bypass,
    constant,
    graphs_with_opset,
    only_reader,
    refresh_captures,
    set_input,
    since,
)
from onnxforge.passes._worklist import visit

logger = logging.getLogger(__name__)

FLOATS = frozenset({"e", "f", "d"})
"""numpy kinds of the weights fused: float16, float32, float64 (``dtype.char``)."""


@register_pass
class FuseBatchNormIntoConvPass(Pass):
    """Fold ``y = BatchNormalization(Conv(x, W, b), scale, B, mean, var)`` into the Conv.

    With ``s = scale / sqrt(var + epsilon)`` per output channel: ``W' = W * s`` (along the
    output-channel axis: 0 for Conv, 1 within each group for ConvTranspose) and
    ``b' = (b - mean) * s + B``, computed in float64 and cast to W's dtype.

    Fused when: the BatchNormalization runs in inference mode (is_test=1 before 7,
    training_mode=0 from 14, spatial=1) and nothing reads its other outputs; scale, B, mean,
    var, W and b are constants; the Conv's output is read by the BatchNormalization alone and
    W by the Conv alone (a weight read elsewhere would be copied). b is replaced in place
    when only the Conv reads it, otherwise the Conv gets a new bias.
    """

    name: ClassVar[str] = "fuse-batchnorm-into-conv"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Fold a BatchNormalization after a Conv into the Conv's weights and bias."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        for graph, opset in graphs_with_opset(model):
            for op in visit(graph, self.focus):
                if op.op_type == "BatchNormalization" and op._graph is graph:
                    label = node_label(op)
                    if self._fuse(graph, op, since(op, opset)):
                        result.note("fused", label)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    def _fuse(self, graph: Graph, bn: Op, version: int | None) -> bool:
        if version is None or not _inference(bn, version) or len(bn._inputs) != 5:
            return False
        if any(v is not None and graph.is_used(v) for v in bn._outputs[1:]):
            return False
        y = bn._inputs[0]
        conv = graph.producer(y) if y is not None else None
        if y is None or conv is None or conv.op_type not in ("Conv", "ConvTranspose"):
            return False
        if conv.domain not in STANDARD_DOMAINS or not only_reader(graph, y, bn):
            return False
        w_value = conv._inputs[1]
        w = constant(w_value)
        if w is None or w.dtype.char not in FLOATS or w.ndim < 3:
            return False
        if not only_reader(graph, w_value, conv):
            return False
        scale, beta, mean, var = (constant(v) for v in bn._inputs[1:])
        group = int(conv.attr("group", 1))
        channels = w.shape[0] if conv.op_type == "Conv" else w.shape[1] * group
        params = [scale, beta, mean, var]
        if any(p is None or p.shape != (channels,) for p in params):
            return False
        bias_value = conv._inputs[2] if len(conv._inputs) > 2 else None
        bias = constant(bias_value) if bias_value is not None else np.zeros(channels)
        if bias is None or bias.shape != (channels,):
            return False
        s = scale.astype(np.float64) / np.sqrt(
            var.astype(np.float64) + float(bn.attr("epsilon", 1e-5))
        )
        fused_bias = (bias.astype(np.float64) - mean) * s + beta
        replace_weight(graph, conv, 1, _scaled(conv, w, s).astype(w.dtype))
        replace_weight(graph, conv, 2, fused_bias.astype(w.dtype), base=f"{y.name}_bias")
        return bypass(graph, bn, y)  # y is read by bn alone: always case 1 or 2


@register_pass
class FuseMulIntoConvPass(Pass):
    """Fold ``y = Mul(Conv(x, W, b), S)`` (either operand order) into the Conv: ``W' = W * s``
    along the output-channel axis and ``b' = b * s``, in float64 cast to W's dtype, where S
    is a constant scalar or per-output-channel tensor (every dim 1 but the channel one,
    broadcasting against the Conv's output). The zoo's Caffe2 exports scale channels this
    way; onnxsim and onnxslim fuse it too.

    Fused when the Mul broadcasts numpy-style (version 7 on; Mul-1/6 align S at ``axis``), W
    (and b, if given) are constants, the Conv's output is read by the Mul alone and W by the
    Conv alone.
    """

    name: ClassVar[str] = "fuse-mul-into-conv"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Fold a Mul by a per-channel constant after a Conv into the Conv's weights."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        for graph, opset in graphs_with_opset(model):
            for op in visit(graph, self.focus):
                # Mul-1/6 align S at `axis`, not at the back: only numpy broadcasting (7+)
                if op.op_type == "Mul" and op._graph is graph and (since(op, opset) or 0) >= 7:
                    label = node_label(op)
                    if any(self._fuse(graph, op, port) for port in (0, 1)):
                        result.note("fused", label)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    def _fuse(self, graph: Graph, mul: Op, port: int) -> bool:
        if mul.domain not in STANDARD_DOMAINS or len(mul._inputs) != 2:
            return False
        y, factor = mul._inputs[port], constant(mul._inputs[1 - port])
        conv = graph.producer(y) if y is not None else None
        if y is None or factor is None or conv is None:
            return False
        if conv.op_type not in ("Conv", "ConvTranspose") or conv.domain not in STANDARD_DOMAINS:
            return False
        if not only_reader(graph, y, mul) or not only_reader(graph, conv._inputs[1], conv):
            return False
        w = constant(conv._inputs[1])
        if w is None or w.dtype.char not in FLOATS or w.ndim < 3 or factor.dtype != w.dtype:
            return False
        group = int(conv.attr("group", 1))
        channels = w.shape[0] if conv.op_type == "Conv" else w.shape[1] * group
        s = _per_channel(factor, w.ndim, channels)
        bias_value = conv._inputs[2] if len(conv._inputs) > 2 else None
        bias = constant(bias_value) if bias_value is not None else None
        if s is None or (bias_value is not None and (bias is None or bias.shape != (channels,))):
            return False
        replace_weight(graph, conv, 1, _scaled(conv, w, s).astype(w.dtype))
        if bias is not None:
            fused_bias = bias.astype(np.float64) * s
            replace_weight(graph, conv, 2, fused_bias.astype(w.dtype), base=f"{y.name}_bias")
        return bypass(graph, mul, y)


def _per_channel(factor: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``factor`` as one float64 per output channel, when it broadcasts against a Conv output
    of ``rank`` dims as a scalar or along the channel axis alone; else None (the Mul would
    change the output's shape or scale along other axes)."""
    if factor.ndim > rank:
        return None
    shape = (1,) * (rank - factor.ndim) + factor.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(factor.reshape(-1).astype(np.float64), (channels,)).copy()


def _scaled(conv: Op, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """W (in float64) with output channel c scaled by ``s[c]``: axis 0 for Conv; for
    ConvTranspose ([C_in, M/group, k...]) channel g*(M/group)+j scales W[group g][:, j]."""
    weights = w.astype(np.float64)
    if conv.op_type == "Conv":
        return weights * s.reshape((s.shape[0],) + (1,) * (w.ndim - 1))
    group = int(conv.attr("group", 1))
    grouped = weights.reshape((group, w.shape[0] // group) + w.shape[1:])
    factor = s.reshape((group, 1, w.shape[1]) + (1,) * (w.ndim - 2))
    return (grouped * factor).reshape(w.shape)


def _inference(bn: Op, version: int) -> bool:
    if version < 7 and not bn.attr("is_test", 0):
        return False
    if version < 9 and not bn.attr("spatial", 1):
        return False
    return not (version >= 14 and bn.attr("training_mode", 0))


def replace_weight(
    graph: Graph, op: Op, port: int, array: np.ndarray, *, base: str | None = None
) -> None:
    """Make ``op`` read ``array`` at ``port``: the initializer there changes in place when
    ``op`` is its only reader, otherwise a new initializer is made (named after ``base``)
    and the old one goes when nothing else reads it."""
    old: Value | None = op._inputs[port] if port < len(op._inputs) else None
    if (
        old is not None
        and isinstance(old.const, Tensor)
        and only_reader(graph, old, op)
        and constant(old) is not None
        and old in graph.initializers
    ):
        old.const = Tensor.from_numpy(np.ascontiguousarray(array), old.const.dtype)
        graph.touch(op)
        return
    name = graph.fresh_name(base or (old.name if old is not None else f"{op.op_type}_weight"))
    value = graph.add_initializer(name, Tensor.from_numpy(np.ascontiguousarray(array)))
    set_input(graph, op, port, value)
    if (
        old is not None
        and old.graph is graph
        and old in graph.initializers
        and not graph.is_used(old)
        and old not in graph.inputs
    ):
        graph.remove_initializer(old)
