"""Shape rules of ops whose (first) output has the shape of their first input.

Activations, math functions, normalizations, Dropout, Identity: cheap to infer ourselves, and
symbolic dims pass through untouched.
"""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence

from onnxforge.ir import DType, Op, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.engine import InferContext, shape_rule

Inputs = Sequence[TensorType | None]

SAME_TYPE = (
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "HardSigmoid", "HardSwish",
    "Softplus", "Softsign", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal",
    "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Identity", "LRN", "Softmax",
    "LogSoftmax", "Hardmax", "ThresholdedRelu", "Celu", "Mish", "Shrink", "InstanceNormalization",
    "Clip",
)  # fmt: skip
BOOL_RESULT = ("IsNaN", "IsInf", "Not")


def _same(t: TensorType | None, dtype: int | None = None) -> TensorType | None:
    if t is None:
        return None if dtype is None else TensorType(dtype, None)
    return TensorType(t.dtype if dtype is None else dtype, t.shape)


for _op in SAME_TYPE:

    @shape_rule(_op, versions=schema_versions(_op))
    def infer_same_type(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
        return [_same(inputs[0])]


for _op in BOOL_RESULT:

    @shape_rule(_op, versions=schema_versions(_op))
    def infer_bool_result(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
        return [_same(inputs[0], DType.BOOL)]


@shape_rule("Dropout", versions=schema_versions("Dropout"))
def infer_dropout(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Output and mask have the input's shape; the mask is bool from Dropout-10 on."""
    x = inputs[0]
    mask = _same(x, DType.BOOL) if ctx.version >= 10 else _same(x)
    return [_same(x), mask]


@shape_rule("BatchNormalization", versions=schema_versions("BatchNormalization"))
def infer_batch_normalization(
    op: Op, inputs: Inputs, ctx: InferContext
) -> list[TensorType | None]:
    """Y has X's shape; the statistics outputs (training) have the shape of the mean input."""
    x = inputs[0]
    stats = [inputs[3] if len(inputs) > 3 else None, inputs[4] if len(inputs) > 4 else None]
    outputs = ctx.scope.graph.outputs_of(op)
    rest = [stats[i % 2] for i in range(len(outputs) - 1)]
    return [_same(x), *rest]
