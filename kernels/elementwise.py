"""Numpy kernels: element-wise ops (arithmetic, math, comparison, logic, activations, Softmax,
Cast, QuantizeLinear/DequantizeLinear).

Results keep the input's element type: integer arithmetic wraps around as ONNX's C++ kernels do
(uint8 3 - 5 = 254), float16 and bfloat16 (``ml_dtypes.bfloat16``) stay float16 and bfloat16.
Add/Sub/Mul/Div/Pow and the comparison and logic ops of opset 1 (and 6) broadcast by the legacy
``broadcast``/``axis`` rule (see ``onnxforge.shape_infer.broadcast``), later versions by
numpy's. What ONNX leaves undefined (integer division by zero, a float out of an integer type's
range, NaN quantized to an integer) is a KernelError, so nothing is folded into a value the
runtime might not compute. Cast, CastLike and Q/DQ on types numpy cannot hold exactly
(float8, int4, int2, float4, float6, string) run onnx's reference implementation.
"""

from __future__ import annotations

__all__ = [
    "arith_1",
    "arith_7",
    "cast",
    "cast_like",
    "clip_1",
    "clip_6",
    "clip_11",
    "compare_1",
    "compare_7",
    "dequantize_linear",
    "log_softmax_1",
    "log_softmax_13",
    "logical_1",
    "logical_7",
    "not_1",
    "pow_1",
    "pow_7",
    "quantize_linear",
    "softmax_1",
    "softmax_13",
    "unary",
    "variadic_1",
    "variadic_8",
    "where_9",
]

import functools
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from onnxforge.errors import ShapeError
from onnxforge.ir import DType, Op
from onnxforge.kernels import kernel
from onnxforge.kernels._common import fail
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape

logger = logging.getLogger(__name__)

Arrays = Sequence["np.ndarray | None"]
VersionedKernel = Callable[..., "list[np.ndarray]"]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
NUMPY_DTYPES: dict[int, np.dtype] = {
    DType.FLOAT: np.dtype(np.float32),
    DType.UINT8: np.dtype(np.uint8),
    DType.INT8: np.dtype(np.int8),
    DType.UINT16: np.dtype(np.uint16),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64),
    DType.BOOL: np.dtype(np.bool_),
    DType.FLOAT16: np.dtype(np.float16),
    DType.DOUBLE: np.dtype(np.float64),
    DType.UINT32: np.dtype(np.uint32),
    DType.UINT64: np.dtype(np.uint64),
    DType.BFLOAT16: BFLOAT16,
}
"""The element types our kernels compute on exactly; the others go to onnx's reference."""
EXACT_DTYPES = frozenset(NUMPY_DTYPES.values())


# ---------------------------------------------------------------------------------------------
# Helpers


def _quiet(fn: Callable[..., list[np.ndarray]]) -> Callable[..., list[np.ndarray]]:
    """Run a kernel without numpy's floating-point and overflow warnings: inf, NaN and
    wrap-around are the results ONNX asks for."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return run


def _versioned(
    op_types: str | Iterable[str], versions: Iterable[int]
) -> Callable[[VersionedKernel], VersionedKernel]:
    """Register ``fn(op, inputs, *, version)`` once per schema version, bound to it (kernels
    that hand some element types to onnx's reference must tell it the version)."""

    def add(fn: VersionedKernel) -> VersionedKernel:
        for version in versions:
            kernel(op_types, versions=(version,))(functools.partial(fn, version=version))
        return fn

    return add


def _args(op: Op, inputs: Arrays, required: int, total: int | None = None) -> list[Any]:
    """The inputs padded with None up to ``total``; the first ``required`` must be present."""
    total = required if total is None else total
    if len(inputs) < required or len(inputs) > total:
        want = str(required) if total == required else f"{required} to {total}"
        raise fail(op, f"takes {want} inputs, got {len(inputs)}")
    args = list(inputs) + [None] * (total - len(inputs))
    for i in range(required):
        if args[i] is None:
            raise fail(op, f"input {i} is required")
    return [None if a is None else np.asarray(a) for a in args]


def _variadic(op: Op, inputs: Arrays) -> list[np.ndarray]:
    if not inputs or any(a is None for a in inputs):
        raise fail(op, "takes one or more inputs, none of them omitted")
    return [np.asarray(a) for a in inputs]


def _same_dtype(op: Op, arrays: Sequence[np.ndarray]) -> np.dtype:
    """The one element type of ``arrays``; mixing types would make numpy promote."""
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        names = ", ".join(str(a.dtype) for a in arrays)
        raise fail(op, f"inputs must share one element type, got {names}")
    return arrays[0].dtype


def _shapes(arrays: Sequence[np.ndarray]) -> str:
    return " and ".join(format_shape(a.shape) for a in arrays)


def _numpy_broadcast(op: Op, arrays: Sequence[np.ndarray]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    except ValueError:
        raise fail(op, f"cannot broadcast {_shapes(arrays)}") from None


def _equal_shapes(op: Op, arrays: Sequence[np.ndarray]) -> None:
    if len({a.shape for a in arrays}) > 1:
        raise fail(op, f"inputs must have equal shapes (no broadcasting), got {_shapes(arrays)}")


def _legacy_b(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """B reshaped so that numpy broadcasting places it on A as opset 1/6 did.

    ``broadcast=0``: equal shapes. ``broadcast=1``: rank(B) <= rank(A); a one-element B fits
    from any axis, any other B sits on A's dims from ``axis`` (absent or -1 meaning suffix
    alignment), checked by the shape rule's ``broadcast_shape(rule="legacy")``, so an invalid
    model is a KernelError, never a value. The result has A's shape.
    """
    if not op.attr("broadcast", 0):
        if a.shape != b.shape:
            raise fail(
                op,
                f"broadcast=0 needs equal shapes, got A {format_shape(a.shape)} "
                f"and B {format_shape(b.shape)}",
            )
        return b
    axis = op.attr("axis")
    try:
        broadcast_shape(a.shape, b.shape, rule="legacy", axis=axis)
    except ShapeError as e:
        raise fail(op, str(e)) from None
    if b.size == 1:
        return b.reshape(())
    start = a.ndim - b.ndim if axis is None or axis == -1 else int(axis)
    return b.reshape((1,) * start + b.shape + (1,) * (a.ndim - start - b.ndim))


def _array(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` as an array of ``dtype`` (ufuncs on 0-d arrays return numpy scalars)."""
    return np.asarray(x).astype(dtype, copy=False)


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == BFLOAT16


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def _via_float64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """``fn`` computed in float64 and rounded once to the input's type: float16, bfloat16 and
    float32 results are then correctly rounded (or as close as float64's ``fn`` is)."""

    def run(x: np.ndarray) -> np.ndarray:
        return _array(fn(x.astype(np.float64)), x.dtype)

    return run


def _reference(op: Op, inputs: Arrays, version: int) -> list[np.ndarray]:
    """onnx's reference implementation, for element types numpy cannot hold exactly."""
    from onnxforge.kernels._reference import run_reference  # noqa: PLC0415  (imports onnx)

    return run_reference(op, inputs, {"": version})


# ---------------------------------------------------------------------------------------------
# Add, Sub, Mul, Div, Pow


def _divide(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float division; integer division truncates toward zero as C++ does."""
    if not _is_int(a.dtype):
        return np.divide(a, b)
    if np.any(b == 0) and math.prod(_numpy_broadcast(op, (a, b))) > 0:
        raise fail(op, "integer division by zero")
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    return q + ((r != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)


ARITH: dict[str, Callable[[Op, np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": lambda op, a, b: np.add(a, b),
    "Sub": lambda op, a, b: np.subtract(a, b),
    "Mul": lambda op, a, b: np.multiply(a, b),
    "Div": _divide,
}


@kernel(("Add", "Sub", "Mul", "Div"), versions=(1, 6))
@_quiet
def arith_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Opset 1/6 arithmetic: legacy broadcasting, output of A's shape and type."""
    a, b = _args(op, inputs, 2)
    dtype = _same_dtype(op, (a, b))
    return [_array(ARITH[op.op_type](op, a, _legacy_b(op, a, b)), dtype)]


@kernel(("Add", "Sub", "Mul", "Div"), versions=(7, 13, 14))
@_quiet
def arith_7(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Arithmetic with numpy broadcasting, computed in the inputs' type (ints wrap around)."""
    a, b = _args(op, inputs, 2)
    dtype = _same_dtype(op, (a, b))
    _numpy_broadcast(op, (a, b))
    return [_array(ARITH[op.op_type](op, a, b), dtype)]


def _int_power(op: Op, base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Integer base and exponent: exact, wrapping in the base's type. A negative exponent
    truncates 1/base^-e toward zero (1, -1 or 0); zero to a negative power is a KernelError."""
    shape = _numpy_broadcast(op, (base, exponent))
    x = np.broadcast_to(base, shape)
    e = np.broadcast_to(exponent, shape)
    negative = e < 0 if exponent.dtype.kind == "i" else np.zeros(shape, dtype=bool)
    if np.any(negative & (x == 0)):
        raise fail(op, "zero to a negative power (division by zero)")
    bits = np.where(negative, 0, e).astype(np.uint64)
    result = np.ones(shape, dtype=base.dtype)
    square = x.copy()
    while np.any(bits):
        odd = (bits & np.uint64(1)).astype(bool)
        result = np.where(odd, result * square, result)
        square = square * square
        bits = bits >> np.uint64(1)
    if np.any(negative):
        one = x == 1
        minus_one = (x == -1) if base.dtype.kind == "i" else np.zeros(shape, dtype=bool)
        odd_exponent = (e % 2) != 0
        inverse = np.where(one, 1, np.where(minus_one, np.where(odd_exponent, -1, 1), 0))
        result = np.where(negative, inverse.astype(base.dtype), result)
    return _array(result, base.dtype)


def _float_to_int(op: Op, values: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """Float values truncated toward zero into an integer type; a value that does not fit
    (NaN, inf, out of range) is undefined behaviour in ONNX: a KernelError."""
    t = np.trunc(values.astype(np.float64))
    info = np.iinfo(dtype)
    fits = (t >= float(info.min)) & (t < float(info.max + 1))
    if not np.all(fits):
        bad = t[~fits].flat[0]
        raise fail(op, f"{what} {bad} does not fit {dtype} (undefined in ONNX)")
    return t.astype(dtype)


def _power(op: Op, base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """``base ** exponent`` with the base's element type, whatever the exponent's."""
    if _is_int(base.dtype):
        if _is_int(exponent.dtype):
            return _int_power(op, base, exponent)
        value = np.power(base.astype(np.float64), exponent.astype(np.float64))
        return _float_to_int(op, np.asarray(value), base.dtype, "the power")
    if exponent.dtype == base.dtype:
        return _array(np.power(base, exponent), base.dtype)
    return _array(np.power(base.astype(np.float64), exponent.astype(np.float64)), base.dtype)


@kernel("Pow", versions=(1,))
@_quiet
def pow_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Pow-1: legacy broadcasting of the exponent onto the base."""
    x, y = _args(op, inputs, 2)
    _same_dtype(op, (x, y))
    return [_power(op, x, _legacy_b(op, x, y))]


@kernel("Pow", versions=(7, 12, 13, 15))
@_quiet
def pow_7(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Pow with numpy broadcasting; from 12 the exponent may have another type than the base."""
    x, y = _args(op, inputs, 2)
    _numpy_broadcast(op, (x, y))
    return [_power(op, x, y)]


# ---------------------------------------------------------------------------------------------
# Unary math and activations


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative,
    "Abs": np.absolute,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.rint,  # half to even
    "Sqrt": np.sqrt,  # correctly rounded in every float type
    "Reciprocal": np.reciprocal,  # likewise
    "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "Exp": _via_float64(np.exp),
    "Log": _via_float64(np.log),
    "Tanh": _via_float64(np.tanh),
    "Sigmoid": _via_float64(_sigmoid),
    "Sin": _via_float64(np.sin),
    "Cos": _via_float64(np.cos),
    "Tan": _via_float64(np.tan),
    "Asin": _via_float64(np.arcsin),
    "Acos": _via_float64(np.arccos),
    "Atan": _via_float64(np.arctan),
    "Sinh": _via_float64(np.sinh),
    "Cosh": _via_float64(np.cosh),
    "Asinh": _via_float64(np.arcsinh),
    "Acosh": _via_float64(np.arccosh),
    "Atanh": _via_float64(np.arctanh),
}


@kernel(
    ("Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Floor", "Ceil", "Sigmoid", "Tanh"),
    versions=(1, 6, 13),
)
@kernel("Relu", versions=(1, 6, 13, 14))
@kernel("Round", versions=(11, 22))
@kernel(("Sin", "Cos", "Tan", "Asin", "Acos", "Atan"), versions=(7, 22))
@kernel(("Sinh", "Cosh", "Asinh", "Acosh", "Atanh"), versions=(9, 22))
@_quiet
def unary(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """One-input math in the input's type (Neg and Abs of the most negative integer wrap)."""
    (x,) = _args(op, inputs, 1)
    return [_array(UNARY[op.op_type](x), x.dtype)]


# ---------------------------------------------------------------------------------------------
# Min, Max, Mean, Sum


def _reduce_variadic(op: Op, arrays: list[np.ndarray]) -> np.ndarray:
    dtype = _same_dtype(op, arrays)
    if op.op_type in ("Min", "Max"):
        fn = np.minimum if op.op_type == "Min" else np.maximum  # NaN propagates
        result = functools.reduce(fn, arrays)
    else:
        result = functools.reduce(np.add, arrays)  # left to right, in the inputs' type
        if op.op_type == "Mean":
            result = np.divide(result, np.asarray(len(arrays), dtype=dtype))
    return _array(np.copy(result), dtype)


@kernel(("Min", "Max", "Mean", "Sum"), versions=(1, 6))
@_quiet
def variadic_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Opset 1/6 Min/Max/Mean/Sum: equal shapes, no broadcasting."""
    arrays = _variadic(op, inputs)
    _equal_shapes(op, arrays)
    return [_reduce_variadic(op, arrays)]


@kernel(("Min", "Max"), versions=(8, 12, 13))
@kernel(("Mean", "Sum"), versions=(8, 13))
@_quiet
def variadic_8(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Min/Max/Mean/Sum with numpy broadcasting of all inputs."""
    arrays = _variadic(op, inputs)
    _numpy_broadcast(op, arrays)
    return [_reduce_variadic(op, arrays)]


# ---------------------------------------------------------------------------------------------
# Comparison and logic

COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
}
LOGICAL: dict[str, Callable[[Any, Any], Any]] = {
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}


def _check_bool(op: Op, arrays: Sequence[np.ndarray]) -> None:
    for a in arrays:
        if a.dtype != np.bool_:
            raise fail(op, f"takes bool tensors, got {a.dtype}")


@kernel(("Equal", "Less", "Greater"), versions=(1,))
@_quiet
def compare_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Opset 1 comparison: legacy broadcasting, bool output of A's shape."""
    a, b = _args(op, inputs, 2)
    _same_dtype(op, (a, b))
    return [_array(COMPARE[op.op_type](a, _legacy_b(op, a, b)), np.dtype(np.bool_))]


@kernel("Equal", versions=(7, 11, 13, 19))
@kernel(("Less", "Greater"), versions=(7, 9, 13))
@kernel(("LessOrEqual", "GreaterOrEqual"), versions=(12, 16))
@_quiet
def compare_7(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Comparison with numpy broadcasting (Equal-19 also compares strings)."""
    a, b = _args(op, inputs, 2)
    _same_dtype(op, (a, b))
    _numpy_broadcast(op, (a, b))
    return [_array(COMPARE[op.op_type](a, b), np.dtype(np.bool_))]


@kernel(("And", "Or", "Xor"), versions=(1,))
def logical_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Opset 1 And/Or/Xor: legacy broadcasting."""
    a, b = _args(op, inputs, 2)
    _check_bool(op, (a, b))
    return [_array(LOGICAL[op.op_type](a, _legacy_b(op, a, b)), np.dtype(np.bool_))]


@kernel(("And", "Or", "Xor"), versions=(7,))
def logical_7(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """And/Or/Xor with numpy broadcasting."""
    a, b = _args(op, inputs, 2)
    _check_bool(op, (a, b))
    _numpy_broadcast(op, (a, b))
    return [_array(LOGICAL[op.op_type](a, b), np.dtype(np.bool_))]


@kernel("Not", versions=(1,))
def not_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    (x,) = _args(op, inputs, 1)
    _check_bool(op, (x,))
    return [_array(np.logical_not(x), np.dtype(np.bool_))]


@kernel("Where", versions=(9, 16))
def where_9(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """X where the condition holds, else Y; all three broadcast."""
    condition, x, y = _args(op, inputs, 3)
    _check_bool(op, (condition,))
    dtype = _same_dtype(op, (x, y))
    _numpy_broadcast(op, (condition, x, y))
    return [_array(np.where(condition, x, y), dtype)]


# ---------------------------------------------------------------------------------------------
# Clip

FLOAT32_MAX = float(np.finfo(np.float32).max)


def _clip(x: np.ndarray, low: np.ndarray | None, high: np.ndarray | None) -> np.ndarray:
    """min(max(x, low), high): all values become ``high`` when low > high; NaN stays NaN."""
    result = x
    if low is not None:
        result = np.maximum(result, low)
    if high is not None:
        result = np.minimum(result, high)
    return _array(np.copy(result), x.dtype)


def _bound(op: Op, value: Any, dtype: np.dtype, name: str) -> np.ndarray | None:
    if value is None:
        return None
    array = np.asarray(value)
    if array.size != 1:
        raise fail(op, f"{name} must be a scalar, got shape {format_shape(array.shape)}")
    return array.reshape(()).astype(dtype)


@kernel("Clip", versions=(1,))
@_quiet
def clip_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Clip-1: bounds in float attributes; no clipping on a side without one."""
    (x,) = _args(op, inputs, 1)
    return [
        _clip(
            x,
            _bound(op, op.attr("min"), x.dtype, "min"),
            _bound(op, op.attr("max"), x.dtype, "max"),
        )
    ]


@kernel("Clip", versions=(6,))
@_quiet
def clip_6(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Clip-6: bounds in float attributes, defaulting to float32's range (so a double beyond
    it is clipped, as the schema's defaults say)."""
    (x,) = _args(op, inputs, 1)
    low = _bound(op, op.attr("min", -FLOAT32_MAX), x.dtype, "min")
    high = _bound(op, op.attr("max", FLOAT32_MAX), x.dtype, "max")
    return [_clip(x, low, high)]


@kernel("Clip", versions=(11, 12, 13))
@_quiet
def clip_11(op: Op, inputs: Arrays) -> list[np.ndarray]:
    """Clip-11+: optional scalar inputs min and max of the input's type."""
    x, low, high = _args(op, inputs, 1, 3)
    for name, bound in (("min", low), ("max", high)):
        if bound is not None and bound.dtype != x.dtype:
            raise fail(op, f"{name} is {bound.dtype}, the input {x.dtype}")
    return [_clip(x, _bound(op, low, x.dtype, "min"), _bound(op, high, x.dtype, "max"))]


# ---------------------------------------------------------------------------------------------
# Softmax, LogSoftmax


def _normalize_axis(op: Op, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise fail(op, f"axis {axis} is outside [{-rank}, {rank - 1}] for rank {rank}")
    return axis % rank


def _softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """Softmax (or its log) along ``axis``, every step in the input's type as the node suite
    computes its expected outputs (float16 and bfloat16 round after each step)."""
    if x.size == 0:
        return x.copy()
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    total = np.sum(exp, axis=axis, keepdims=True, dtype=x.dtype)
    return _array(shifted - np.log(total) if log else exp / total, x.dtype)


def _softmax_2d(op: Op, inputs: Arrays, log: bool) -> np.ndarray:
    """Versions 1 and 11: the input seen as 2-D, [prod(dims before axis), prod(the rest)]."""
    (x,) = _args(op, inputs, 1)
    axis = _normalize_axis(op, int(op.attr("axis", 1)), x.ndim)
    rows = math.prod(x.shape[:axis])
    flat = x.reshape(rows, math.prod(x.shape[axis:]))
    return _softmax(flat, 1, log).reshape(x.shape)


def _softmax_axis(op: Op, inputs: Arrays, log: bool) -> np.ndarray:
    """Version 13: along one axis (default -1)."""
    (x,) = _args(op, inputs, 1)
    return _softmax(x, _normalize_axis(op, int(op.attr("axis", -1)), x.ndim), log)


@kernel("Softmax", versions=(1, 11))
@_quiet
def softmax_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    return [_softmax_2d(op, inputs, log=False)]


@kernel("Softmax", versions=(13,))
@_quiet
def softmax_13(op: Op, inputs: Arrays) -> list[np.ndarray]:
    return [_softmax_axis(op, inputs, log=False)]


@kernel("LogSoftmax", versions=(1, 11))
@_quiet
def log_softmax_1(op: Op, inputs: Arrays) -> list[np.ndarray]:
    return [_softmax_2d(op, inputs, log=True)]


@kernel("LogSoftmax", versions=(13,))
@_quiet
def log_softmax_13(op: Op, inputs: Arrays) -> list[np.ndarray]:
    return [_softmax_axis(op, inputs, log=True)]


# ---------------------------------------------------------------------------------------------
# Cast, CastLike


def _cast_array(op: Op, x: np.ndarray, target: np.dtype) -> np.ndarray:
    """ONNX's numeric conversions: float to int truncates toward zero (out of range is
    undefined: a KernelError), int to int keeps the low bits, to bool is ``!= 0``."""
    if x.dtype == target:
        return x.copy()
    if target == np.bool_:
        return _array(x != 0, target)
    if _is_float(x.dtype) and _is_int(target):
        return _float_to_int(op, x, target, "the value")
    return x.astype(target)


def _cast_target(op: Op, version: int) -> int:
    to = op.attr("to")
    if to is None:
        raise fail(op, "has no 'to' attribute")
    if version == 1:  # Cast-1 names the type: "FLOAT"
        name = to.decode() if isinstance(to, bytes) else str(to)
        try:
            return int(DType[name.upper()])
        except KeyError:
            raise fail(op, f"'to' names no element type: {name!r}") from None
    return int(to)


@_versioned("Cast", versions=(1, 6, 9, 13, 19, 21, 23, 24, 25, 28))
@_quiet
def cast(op: Op, inputs: Arrays, *, version: int) -> list[np.ndarray]:
    """Cast between bool, integer and float16/bfloat16/float/double types; strings, float8,
    int4/int2, float4/float6 and float8e8m0 run onnx's reference."""
    (x,) = _args(op, inputs, 1)
    target = NUMPY_DTYPES.get(_cast_target(op, version))
    if target is None or x.dtype not in EXACT_DTYPES:
        return _reference(op, inputs, version)
    return [_cast_array(op, x, target)]


@_versioned("CastLike", versions=(15, 19, 21, 23, 24, 25))
@_quiet
def cast_like(op: Op, inputs: Arrays, *, version: int) -> list[np.ndarray]:
    """Cast to the element type of the second input."""
    x, like = _args(op, inputs, 2)
    if like.dtype not in EXACT_DTYPES or x.dtype not in EXACT_DTYPES:
        return _reference(op, inputs, version)
    return [_cast_array(op, x, like.dtype)]


# ---------------------------------------------------------------------------------------------
# QuantizeLinear, DequantizeLinear

QUANT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(np.int16): (-32768, 32767),
}
"""Integer types we quantize to; int4/uint4/int2/uint2 and float8/float4 go to the reference."""
QUANT_SCALES = frozenset({np.dtype(np.float32), np.dtype(np.float16), BFLOAT16})
QUANT_INPUTS = QUANT_SCALES | {np.dtype(np.int32)}
DEQUANT_INPUTS = frozenset(QUANT_RANGES) | {np.dtype(np.int32)}


def _quant_param(op: Op, param: np.ndarray, x: np.ndarray, name: str, version: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast onto x: per tensor (one element), per axis
    (1-D along ``axis``) or blocked (x's rank, ``block_size`` elements of x per element)."""
    block_size = int(op.attr("block_size", 0)) if version >= 21 else 0
    if block_size < 0:
        raise fail(op, f"block_size must be positive, got {block_size}")
    if not block_size and param.size == 1 and param.ndim <= 1:
        return param.reshape(())
    if version < 13:
        raise fail(op, f"{name} must be a scalar, got shape {format_shape(param.shape)}")
    axis = _normalize_axis(op, int(op.attr("axis", 1)), x.ndim)
    length = x.shape[axis]
    if not block_size:
        if param.ndim != 1 or param.shape[0] != length:
            raise fail(
                op,
                f"{name} of shape {format_shape(param.shape)} is neither a scalar nor 1-D "
                f"of x's dim {axis} ({length}); x is {format_shape(x.shape)}",
            )
        return param.reshape((1,) * axis + (length,) + (1,) * (x.ndim - axis - 1))
    others_fit = param.ndim == x.ndim and all(
        p == d for i, (p, d) in enumerate(zip(param.shape, x.shape, strict=True)) if i != axis
    )
    if not others_fit or param.shape[axis] != -(-length // block_size):
        raise fail(
            op,
            f"{name} of shape {format_shape(param.shape)} does not block x of shape "
            f"{format_shape(x.shape)} along axis {axis} with block_size {block_size}",
        )
    repeated = np.repeat(param, block_size, axis=axis)
    return np.take(repeated, np.arange(length), axis=axis)


def _exact_dtype(op: Op, code: int) -> np.dtype | None:
    """The numpy type of an element type code; None for types numpy cannot hold exactly."""
    try:
        DType(code)
    except ValueError:
        raise fail(op, f"unknown element type {code}") from None
    return NUMPY_DTYPES.get(code)


@_versioned("QuantizeLinear", versions=(10, 13, 19, 21, 23, 24, 25, 28))
@_quiet
def quantize_linear(op: Op, inputs: Arrays, *, version: int) -> list[np.ndarray]:
    """y = saturate(round_half_even(x / y_scale) + y_zero_point) to int8/uint8/int16/uint16,
    the division in y_scale's type (or ``precision``'s). NaN has no quantized value: a
    KernelError. Other output types (float8, int4, ...) and scales run onnx's reference."""
    x, scale, zero_point = _args(op, inputs, 2, 3)
    code = int(op.attr("output_dtype", 0)) if version >= 21 else 0
    named = _exact_dtype(op, code) if code else None
    if zero_point is not None:
        if code and named != zero_point.dtype:
            raise fail(op, f"output_dtype {code} differs from y_zero_point's {zero_point.dtype}")
        out: np.dtype | None = zero_point.dtype
    else:
        out = named if code else np.dtype(np.uint8)
    precision_code = int(op.attr("precision", 0)) if version >= 23 else 0
    precision = _exact_dtype(op, precision_code) if precision_code else scale.dtype
    if (
        out not in QUANT_RANGES
        or x.dtype not in QUANT_INPUTS
        or scale.dtype not in QUANT_SCALES
        or precision not in QUANT_SCALES
    ):
        return _reference(op, inputs, version)
    assert out is not None and precision is not None
    y_scale = _quant_param(op, scale, x, "y_scale", version)
    quotient = np.rint(np.divide(x.astype(precision), y_scale.astype(precision)))
    if np.any(np.isnan(quotient)):
        raise fail(op, "x / y_scale is NaN, which has no quantized value")
    shifted = quotient.astype(np.float64)
    if zero_point is not None:
        shifted = shifted + _quant_param(op, zero_point, x, "y_zero_point", version)
    low, high = QUANT_RANGES[out]
    return [_array(np.clip(shifted, low, high), out)]


@_versioned("DequantizeLinear", versions=(10, 13, 19, 21, 23, 24, 25, 28))
@_quiet
def dequantize_linear(op: Op, inputs: Arrays, *, version: int) -> list[np.ndarray]:
    """y = (x - x_zero_point) * x_scale for int8/uint8/int16/uint16/int32 x and float, float16
    or bfloat16 scales: exact difference, the product rounded once to the output type
    (``output_dtype``, else the scale's). Float8/int4/... inputs run onnx's reference."""
    x, scale, zero_point = _args(op, inputs, 2, 3)
    code = int(op.attr("output_dtype", 0)) if version >= 23 else 0
    out = _exact_dtype(op, code) if code else scale.dtype
    if x.dtype not in DEQUANT_INPUTS or scale.dtype not in QUANT_SCALES or out not in QUANT_SCALES:
        return _reference(op, inputs, version)
    assert out is not None
    difference = x.astype(np.int64)
    if zero_point is not None:
        if zero_point.dtype != x.dtype:
            raise fail(op, f"x_zero_point is {zero_point.dtype}, x {x.dtype}")
        difference = difference - _quant_param(op, zero_point, x, "x_zero_point", version)
    x_scale = _quant_param(op, scale, x, "x_scale", version).astype(np.float64)
    return [_array(difference.astype(np.float64) * x_scale, out)]
