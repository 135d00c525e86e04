"""onnxscript models for the corpus (``corpus.py --only onnxscript``): a for-loop (Loop), an if
(If), attention with a Shape-derived scale and a Split by num_outputs. No ``from __future__
import annotations``: onnxscript reads the annotations as types."""

from onnxscript import FLOAT, INT64, script
from onnxscript import opset18 as op

__all__ = ["MODELS"]

Matrix = FLOAT["N", "M"]
Queries = FLOAT["B", "S", 8]
Keys = FLOAT["B", "T", 8]


@script()
def loop_accumulate(x: Matrix, steps: INT64) -> Matrix:
    acc = op.Identity(x)
    for _ in range(steps):
        acc = op.Add(acc, x)
    return acc


@script()
def if_gated(x: Matrix) -> Matrix:
    if op.ReduceSum(x, keepdims=0) > op.Constant(value_float=0.0):  # noqa: SIM108
        y = op.Relu(x)
    else:
        y = op.Neg(x)
    return y


@script()
def attention(q: Queries, k: Keys, v: Keys) -> Queries:
    scores = op.MatMul(q, op.Transpose(k, perm=[0, 2, 1]))
    depth = op.Cast(op.Gather(op.Shape(q), op.Constant(value_int=2)), to=1)
    weights = op.Softmax(op.Div(scores, op.Sqrt(depth)), axis=-1)
    first, second = op.Split(op.MatMul(weights, v), axis=2, num_outputs=2)
    return op.Concat(second, first, axis=2)


MODELS = {"loop_accumulate": loop_accumulate, "if_gated": if_gated, "attention": attention}
