"""fuse-matmul-add: MatMul of two 2-D matrices followed by an Add becomes one Gemm."""

from __future__ import annotations

__all__ = ["FuseMatMulAddPass"]

import logging
from typing import ClassVar

from onnxforge.ir import DType, Graph, Model, Op, Tensor
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    bypass,
    constant,
    dtype_of,
    graphs_with_opset,
    inferred_types,
    only_reader,
    refresh_captures,
    set_input,
    shape_of,
    since,
)
from onnxforge.passes._worklist import visit
from onnxforge.shape_infer.symbolic import same_dim

logger = logging.getLogger(__name__)

GEMM_TYPES = frozenset({DType.FLOAT, DType.DOUBLE})
"""Gemm accepts more (float16, integers from 11), but onnxruntime's CPU kernel only these."""


@register_pass
class FuseMatMulAddPass(Pass):
    """Replace ``z = Add(MatMul(A, B), C)`` (either order) by ``z = Gemm(A, B, C)``.

    Only when A and B are 2-D (Gemm has no batch and no vector operands), their dtype is
    float or double, the MatMul's output is read by the Add alone, and C is a constant the
    caller cannot override that broadcasts to the [M, N] result without changing it (each dim,
    aligned right, is 1 or provably equal), which is Gemm's unidirectional broadcast of C. The
    model's opset must be 7 or later (Gemm's C broadcast). The MatMul becomes the Gemm; alpha
    and beta are 1, and C is written 1-D when it is one row.

    The Gemm is for converters, which make it a linear layer: onnxruntime fuses MatMul + Add
    itself. pnnx makes Gemm(x, W, [N]) an ncnn InnerProduct, but a Gemm whose C is [1, N] or
    computed an F.linear, which ncnn lacks (qonnx's mnist-conv, whose bias is an IR-3 input),
    where it converts the MatMul and Add.
    """

    name: ClassVar[str] = "fuse-matmul-add"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = "Replace Add(MatMul(A, B), C) by Gemm(A, B, C)."

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        with inferred_types(model):
            for graph, opset in graphs_with_opset(model):
                if opset < 7:
                    continue
                for op in visit(graph, self.focus):
                    if op.op_type != "Add" or op._graph is not graph or len(op._inputs) != 2:
                        continue
                    if (since(op, opset) or 0) < 7:
                        continue
                    label = node_label(op)
                    if any(self._fuse(graph, op, port) for port in (0, 1)):
                        result.note("fused", label)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    @staticmethod
    def _fuse(graph: Graph, add: Op, port: int) -> bool:
        y, c = add._inputs[port], add._inputs[1 - port]
        matmul = graph.producer(y) if y is not None else None
        if matmul is None or c is None or matmul.op_type != "MatMul":
            return False
        if matmul.domain not in STANDARD_DOMAINS or not only_reader(graph, y, add):
            return False
        a, b = matmul._inputs
        a_shape, b_shape, c_shape = shape_of(a), shape_of(b), shape_of(c)
        if a_shape is None or b_shape is None or c_shape is None:
            return False
        if len(a_shape) != 2 or len(b_shape) != 2 or len(c_shape) > 2:
            return False
        if dtype_of(a) not in GEMM_TYPES or dtype_of(c) != dtype_of(a):
            return False
        out = (a_shape[0], b_shape[1])
        aligned = zip(c_shape[::-1], out[::-1], strict=False)
        if not all(n == 1 or same_dim(n, d) for n, d in aligned):
            return False
        bias = constant(c)
        if bias is None:
            return False
        matmul.op_type = "Gemm"
        if bias.ndim == 2 and bias.shape[0] == 1:
            c = graph.add_initializer(
                graph.fresh_name(f"{c.name}_row"),
                Tensor.from_numpy(bias.reshape(bias.shape[1:]), dtype_of(c)),
            )
        set_input(graph, matmul, 2, c)
        assert y is not None
        return bypass(graph, add, y)
