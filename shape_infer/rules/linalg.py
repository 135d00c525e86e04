"""Shape rules of MatMul, Gemm, Transpose and Flatten, with symbolic dims kept; MatMulInteger
and QLinearMatMul are MatMul's shape with their own element type. ``matmul_shape`` and
``gemm_shape`` are shared with com.microsoft's quantized twins (contrib)."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, DType, Op, Shape, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape
from onnxforge.shape_infer.engine import InferContext, shape_rule
from onnxforge.shape_infer.symbolic import dim_product, same_dim

Inputs = Sequence[TensorType | None]


def _contract(a: Dim, b: Dim, ctx: InferContext, shapes: str) -> None:
    """The contracted dims of a product must be equal (an unnamed input dim too: random
    inputs take the size the weight gives it)."""
    if a is None or b is None or same_dim(a, b):
        return
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{shapes}: inner dims {a} and {b} differ")
    ctx.assume(a, b)


def matmul_shape(op: Op, a: Shape, b: Shape, ctx: InferContext) -> Shape:
    """numpy.matmul's shape: 1-D operands are promoted and the added dim removed; batch dims
    broadcast. ShapeError when the inner dims differ or an operand is a scalar."""
    if not a or not b:
        raise ShapeError(f"{op.op_type} does not take scalars")
    sa = (1, *a) if len(a) == 1 else a
    sb = (*b, 1) if len(b) == 1 else b
    shapes = f"{format_shape(a)} x {format_shape(b)}"
    _contract(sa[-1], sb[-2], ctx, shapes)
    batch = broadcast_shape(sa[:-2], sb[:-2], on_assume=ctx.assume)
    out = [*batch]
    if len(a) > 1:
        out.append(sa[-2])
    if len(b) > 1:
        out.append(sb[-1])
    return tuple(out)


@shape_rule("MatMul", versions=schema_versions("MatMul"))
def infer_matmul(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """numpy.matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast."""
    a, b = inputs[0], inputs[1]
    if a is None or b is None:
        known = a or b
        return [None if known is None else TensorType(known.dtype, None)]
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    return [TensorType(a.dtype, matmul_shape(op, a.shape, b.shape, ctx))]


def _quantized_matmul(
    op: Op, a: TensorType | None, b: TensorType | None, dtype: int, ctx: InferContext
) -> list[TensorType | None]:
    """MatMul's shape of ``a`` and ``b`` with element type ``dtype`` (0: unknown)."""
    if a is None or b is None or a.shape is None or b.shape is None:
        return [TensorType(dtype, None) if dtype else None]
    return [TensorType(dtype, matmul_shape(op, a.shape, b.shape, ctx))]


@shape_rule("MatMulInteger", versions=schema_versions("MatMulInteger"))
def infer_matmul_integer_10(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """A, B, a_zero_point, b_zero_point: MatMul's shape, int32 accumulators."""
    return _quantized_matmul(op, inputs[0], inputs[1], DType.INT32, ctx)


@shape_rule("QLinearMatMul", versions=schema_versions("QLinearMatMul"))
def infer_qlinear_matmul(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point: MatMul's
    shape of a and b, y_zero_point's element type (0, unknown, while that type is)."""
    zero = inputs[7] if len(inputs) > 7 else None
    b = inputs[3] if len(inputs) > 3 else None
    dtype = DType.UNDEFINED if zero is None else zero.dtype
    return _quantized_matmul(op, inputs[0], b, dtype, ctx)


def gemm_shape(op: Op, a: Shape | None, b: Shape | None, ctx: InferContext) -> Shape:
    """Gemm's (M, N) for A and B under transA and transB; (None, None) while one is unknown."""
    if a is None or b is None:
        return (None, None)
    if len(a) != 2 or len(b) != 2:
        raise ShapeError(
            f"{op.op_type} takes 2-D A and B, not {format_shape(a)} and {format_shape(b)}"
        )
    m, ka = reversed(a) if op.attr("transA", 0) else a
    kb, n = reversed(b) if op.attr("transB", 0) else b
    _contract(ka, kb, ctx, f"{format_shape(a)} x {format_shape(b)}")
    return (m, n)


@shape_rule("Gemm", versions=schema_versions("Gemm"))
def infer_gemm(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    a, b = inputs[0], inputs[1]
    if a is None:
        return [None]
    return [TensorType(a.dtype, gemm_shape(op, a.shape, None if b is None else b.shape, ctx))]


@shape_rule("Transpose", versions=schema_versions("Transpose"))
def infer_transpose(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None or t.shape is None:
        return [t]
    rank = len(t.shape)
    perm = op.attr("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(p + rank if p < 0 else p for p in perm) != list(range(rank)):
        shown = f"{list(perm)[:16]}"[:-1] + ", ...]" if len(perm) > 16 else f"{perm}"
        raise ShapeError(f"perm {shown} ({len(perm)} entries) is not a permutation of {rank} axes")
    return [TensorType(t.dtype, tuple(t.shape[p] for p in perm))]


@shape_rule("Flatten", versions=schema_versions("Flatten"))
def infer_flatten(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None or t.shape is None:
        return [None if t is None else TensorType(t.dtype, (None, None))]
    rank = len(t.shape)
    axis = int(op.attr("axis", 1))
    low = -rank if ctx.version >= 11 else 0
    if not low <= axis <= rank:
        raise ShapeError(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return [TensorType(t.dtype, (dim_product(t.shape[:axis]), dim_product(t.shape[axis:])))]
