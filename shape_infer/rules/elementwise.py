"""Shape rules of element-wise ops: Sub and the other arithmetic ops, every broadcasting rule."""

from __future__ import annotations

__all__ = [
    "infer_arith_1",
    "infer_arith_7",
    "infer_bitshift_11",
    "infer_compare_1",
    "infer_compare_7",
    "infer_logical_1",
    "infer_logical_7",
    "infer_mod_10",
    "infer_pow_1",
    "infer_pow_7",
    "infer_pow_12",
    "infer_where_9",
]

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from onnxforge import opset as schemas
from onnxforge.errors import ShapeError
from onnxforge.ir import DType, Op, Shape, TensorType, dtype_name
from onnxforge.shape_infer.broadcast import broadcast_shape
from onnxforge.shape_infer.engine import shape_rule

if TYPE_CHECKING:
    from onnxforge.shape_infer.engine import InferContext

logger = logging.getLogger(__name__)

Inputs = Sequence["TensorType | None"]
Formal = tuple[tuple[str, str], ...]
"""(name, type constraint) of each input, as the schema spells them."""

ARITH = ("Add", "Sub", "Mul", "Div")
COMPARE = ("Equal", "Less", "Greater")
LOGICAL = ("And", "Or", "Xor")
AB_T: Formal = (("A", "T"), ("B", "T"))
XY_T: Formal = (("X", "T"), ("Y", "T"))
FLOAT_TYPES = frozenset({DType.FLOAT16, DType.FLOAT, DType.DOUBLE, DType.BFLOAT16})


def check_types(op: Op, ctx: InferContext, inputs: Inputs, formal: Formal) -> None:
    """Each input's element type is one its constraint allows, and inputs that share a
    constraint share the element type. Unknown element types (0) pass."""
    label = f"{op.op_type}-{ctx.version}"
    seen: dict[str, tuple[str, int]] = {}
    for t, (name, param) in zip(inputs, formal, strict=False):
        if t is None or not t.dtype:
            continue
        allowed = schemas.allowed_types(op.op_type, ctx.version, param, op.domain)
        if t.dtype not in allowed:
            names = ", ".join(sorted(dtype_name(d).lower() for d in allowed))
            raise ShapeError(
                f"{label} does not take {dtype_name(t.dtype).lower()} for {name} "
                f"(type {param} allows {names})"
            )
        if param in seen and seen[param][1] != t.dtype:
            first, dtype = seen[param]
            raise ShapeError(
                f"{label} needs one element type for {first} and {name} (both {param}), "
                f"got {dtype_name(dtype).lower()} and {dtype_name(t.dtype).lower()}"
            )
        seen.setdefault(param, (name, t.dtype))


def numpy_shape(inputs: Inputs, ctx: InferContext) -> Shape | None:
    """Multidirectional broadcasting of every input; None when a rank is unknown.

    The known shapes are still broadcast together first, so two that cannot meet are an error
    even when a third input's rank is unknown.
    """
    shapes = [None if t is None else t.shape for t in inputs]
    known = [s for s in shapes if s is not None]
    if not known:
        return None
    out = known[0]
    for shape in known[1:]:
        out = broadcast_shape(out, shape, rule="numpy", on_assume=ctx.assume)
    return out if len(known) == len(shapes) else None


def legacy_shape(
    op: Op, a: TensorType | None, b: TensorType | None, ctx: InferContext
) -> Shape | None:
    """Opset 1/6 broadcasting: ``broadcast=0`` needs equal shapes, ``broadcast=1`` fits B into A
    from ``axis`` (absent: suffix alignment); the output has A's shape."""
    sa = None if a is None else a.shape
    sb = None if b is None else b.shape
    if not ctx.attr("broadcast"):
        if sa is None or sb is None:
            return sa if sb is None else sb
        return broadcast_shape(sa, sb, rule="none", on_assume=ctx.assume)
    if sa is None or sb is None:
        return sa
    axis = op.attr("axis")
    if axis is not None and not isinstance(axis, int):
        raise ShapeError(f"{op.op_type}-{ctx.version}: axis must be an int, got {axis!r}")
    return broadcast_shape(sa, sb, rule="legacy", axis=axis, on_assume=ctx.assume)


def first_dtype(inputs: Inputs) -> int:
    """The element type of the first input whose type is known (0 when none is)."""
    return next((t.dtype for t in inputs if t is not None and t.dtype), 0)


def result(dtype: int, shape: Shape | None) -> list[TensorType | None]:
    """The single output's type; None when neither element type nor rank is known."""
    return [None] if not dtype and shape is None else [TensorType(dtype, shape)]


def legacy_binary(
    op: Op, inputs: Inputs, ctx: InferContext, formal: Formal, out: int | None
) -> list[TensorType | None]:
    """A binary op of opset 1/6: output of A's shape, of A's type or ``out``."""
    a, b = (list(inputs) + [None, None])[:2]
    check_types(op, ctx, inputs, formal)
    shape = legacy_shape(op, a, b, ctx)
    return result(first_dtype(inputs) if out is None else out, shape)


def numpy_nary(
    op: Op, inputs: Inputs, ctx: InferContext, formal: Formal, out: int | None
) -> list[TensorType | None]:
    """A numpy-broadcasting op whose inputs share one type: output of that type or ``out``."""
    check_types(op, ctx, inputs, formal)
    shape = numpy_shape(inputs, ctx)
    return result(first_dtype(inputs) if out is None else out, shape)


@shape_rule(ARITH, versions=(1, 6))
def infer_arith_1(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Add/Sub/Mul/Div-1 and -6: legacy broadcasting, output of A's shape and type."""
    return legacy_binary(op, inputs, ctx, AB_T, None)


@shape_rule(ARITH, versions=(7, 13, 14))
def infer_arith_7(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Add/Sub/Mul/Div-7, -13, -14: numpy broadcasting, A and B of one type."""
    return numpy_nary(op, inputs, ctx, AB_T, None)


@shape_rule("Pow", versions=(1,))
def infer_pow_1(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return legacy_binary(op, inputs, ctx, XY_T, None)


@shape_rule("Pow", versions=(7,))
def infer_pow_7(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return numpy_nary(op, inputs, ctx, XY_T, None)


@shape_rule("Pow", versions=(12, 13, 15))
def infer_pow_12(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Pow-12 on: base X of type T, exponent Y of type T1; the output has X's type."""
    check_types(op, ctx, inputs, (("X", "T"), ("Y", "T1")))
    shape = numpy_shape(inputs, ctx)
    return result(first_dtype(inputs[:1]), shape)  # X's type; Y's says nothing


@shape_rule(COMPARE, versions=(1,))
def infer_compare_1(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Equal/Less/Greater-1: legacy broadcasting, bool output of A's shape."""
    return legacy_binary(op, inputs, ctx, AB_T, DType.BOOL)


@shape_rule("Equal", versions=(7, 11, 13, 19))
@shape_rule(("Less", "Greater"), versions=(7, 9, 13))
@shape_rule(("LessOrEqual", "GreaterOrEqual"), versions=(12, 16))
def infer_compare_7(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Equal/Less/Greater from 7, LessOrEqual/GreaterOrEqual: numpy broadcasting, bool."""
    return numpy_nary(op, inputs, ctx, AB_T, DType.BOOL)


@shape_rule(LOGICAL, versions=(1,))
def infer_logical_1(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return legacy_binary(op, inputs, ctx, AB_T, DType.BOOL)


@shape_rule(LOGICAL, versions=(7,))
def infer_logical_7(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return numpy_nary(op, inputs, ctx, AB_T, DType.BOOL)


@shape_rule("BitShift", versions=(11, 28))
def infer_bitshift_11(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return numpy_nary(op, inputs, ctx, XY_T, None)


@shape_rule("Mod", versions=(10, 13, 28))
def infer_mod_10(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Mod: numpy broadcasting. Before Mod-28 floating-point inputs need ``fmod=1``."""
    out = numpy_nary(op, inputs, ctx, AB_T, None)
    dtype = first_dtype(inputs)
    fmod = ctx.attr("fmod") or 0
    if ctx.version < 28 and dtype in FLOAT_TYPES and fmod != 1:
        raise ShapeError(
            f"Mod-{ctx.version} on {dtype_name(dtype).lower()} needs fmod=1 (fmod is {fmod}; "
            "fmod=0 on floats came with Mod-28)"
        )
    return out


@shape_rule("Where", versions=(9, 16))
def infer_where_9(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Where: condition, X and Y broadcast together; the output has X's (and Y's) type."""
    check_types(op, ctx, inputs, (("condition", "B"), ("X", "T"), ("Y", "T")))
    shape = numpy_shape(inputs, ctx)
    return result(first_dtype(inputs[1:]), shape)
