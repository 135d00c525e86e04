"""Mod at 28: floor modulus (fmod=0) of floating-point inputs, which Mod-13 does not take."""

from __future__ import annotations

__all__ = ["mod_28_27"]

from onnxforge.ir import DType, Graph, Op, TensorType
from onnxforge.passes.convert._build import dtype_of, emit, finish, replace_outputs, scalar
from onnxforge.passes.convert._registry import ConvertContext, adapter

_FLOATS = frozenset({DType.FLOAT16, DType.BFLOAT16, DType.FLOAT, DType.DOUBLE})


@adapter("Mod", 28, 27)
def mod_28_27(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Mod-13 takes floats only with fmod=1 (truncated: the sign of A). fmod=0 on floats
    (floored: the sign of B) becomes r = Mod(A, B, fmod=1), B added where r is nonzero and
    differs from B in sign, and the result given B's sign as Abs(.) * Sign(B) (exact; a zero
    takes B's sign, which onnxruntime's Where would lose). NaN, an infinite A and a zero B
    stay NaN, and a finite A with an infinite B of the other sign gives B, as Mod-28 says.
    Integer nodes and fmod=1 are unchanged."""
    if int(op.attr("fmod", 0) or 0) == 1:
        finish(op, graph, ctx)
        return
    a, b = graph.inputs_of(op)[:2]
    dtype = dtype_of(ctx, a)
    if dtype is None:
        raise ctx.fail(
            op, "fmod=0 and the element type is unknown (Mod-13 takes floats only with fmod=1)"
        )
    if dtype not in _FLOATS:
        finish(op, graph, ctx)
        return
    assert a is not None and b is not None
    out_type = graph.outputs_of(op)[0].type  # type: ignore[union-attr]
    t = TensorType(dtype, out_type.shape if isinstance(out_type, TensorType) else None)
    base = op.name or "mod"
    zero = scalar(graph, ctx, f"{base}_zero", 0.0, dtype)
    r = emit(graph, "Mod", [a, b], base=base, type=t, fmod=1)
    r_negative = emit(graph, "Less", [r, zero], base=base)
    differ = emit(graph, "Xor", [r_negative, emit(graph, "Less", [b, zero], base=base)], base=base)
    nonzero = emit(graph, "Not", [emit(graph, "Equal", [r, zero], base=base)], base=base)
    flip = emit(graph, "And", [differ, nonzero], base=base)
    floored = emit(graph, "Where", [flip, emit(graph, "Add", [r, b], base=base), r], base=base)
    magnitude = emit(graph, "Abs", [floored], base=base)
    out = emit(graph, "Mul", [magnitude, emit(graph, "Sign", [b], base=base)], base=base, type=t)
    replace_outputs(graph, op, [out])
