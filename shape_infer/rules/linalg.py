"""Shape rules of MatMul, Gemm, Transpose and Flatten, with symbolic dims kept."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, Op, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape
from onnxforge.shape_infer.engine import InferContext, shape_rule
from onnxforge.shape_infer.symbolic import dim_product, is_unknown_symbol, same_dim

Inputs = Sequence[TensorType | None]


def _contract(a: Dim, b: Dim, ctx: InferContext, shapes: str) -> None:
    """The contracted dims of a product must be equal."""
    if same_dim(a, b) or is_unknown_symbol(a) or is_unknown_symbol(b):
        return
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{shapes}: inner dims {a} and {b} differ")
    ctx.assume(a, b)


@shape_rule("MatMul", versions=schema_versions("MatMul"))
def infer_matmul(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """numpy.matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast."""
    a, b = inputs[0], inputs[1]
    if a is None or b is None:
        known = a or b
        return [None if known is None else TensorType(known.dtype, None)]
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    if not a.shape or not b.shape:
        raise ShapeError("MatMul does not take scalars")
    sa = (1, *a.shape) if len(a.shape) == 1 else a.shape
    sb = (*b.shape, 1) if len(b.shape) == 1 else b.shape
    shapes = f"{format_shape(a.shape)} x {format_shape(b.shape)}"
    _contract(sa[-1], sb[-2], ctx, shapes)
    batch = broadcast_shape(sa[:-2], sb[:-2], on_assume=ctx.assume)
    out = [*batch]
    if len(a.shape) > 1:
        out.append(sa[-2])
    if len(b.shape) > 1:
        out.append(sb[-1])
    return [TensorType(a.dtype, tuple(out))]


@shape_rule("Gemm", versions=schema_versions("Gemm"))
def infer_gemm(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    a, b = inputs[0], inputs[1]
    if a is None:
        return [None]
    if a.shape is None or b is None or b.shape is None:
        return [TensorType(a.dtype, (None, None))]
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(
            f"Gemm takes 2-D A and B, not {format_shape(a.shape)} and {format_shape(b.shape)}"
        )
    m, ka = reversed(a.shape) if op.attr("transA", 0) else a.shape
    kb, n = reversed(b.shape) if op.attr("transB", 0) else b.shape
    _contract(ka, kb, ctx, f"{format_shape(a.shape)} x {format_shape(b.shape)}")
    return [TensorType(a.dtype, (m, n))]


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
