"""Numpy kernels: reductions and matrix products (ReduceSum/Mean/Max/Min/Prod, MatMul, Gemm),
every schema version.

Outputs keep the input's dtype. float16 and bfloat16 sums, means and products accumulate in
float32 and are rounded once; integer ones stay in their type (wrapping as onnxruntime does).
"""

from __future__ import annotations

__all__ = [
    "gemm_1",
    "gemm_7",
    "gemm_11",
    "matmul_1",
    "reduce_max_1",
    "reduce_max_11",
    "reduce_max_18",
    "reduce_mean_1",
    "reduce_mean_11",
    "reduce_mean_18",
    "reduce_min_1",
    "reduce_min_11",
    "reduce_min_18",
    "reduce_prod_1",
    "reduce_prod_11",
    "reduce_prod_18",
    "reduce_sum_1",
    "reduce_sum_11",
    "reduce_sum_13",
]

import logging
from collections.abc import Callable, Sequence

import numpy as np

from onnxforge.ir import Op
from onnxforge.kernels import kernel
from onnxforge.kernels._common import LOW_FLOATS, Inputs, fail, required_input

logger = logging.getLogger(__name__)


def _flag(op: Op, name: str, default: int) -> bool:
    value = op.attr(name, default)
    if not isinstance(value, int):
        raise fail(op, f"attribute {name} must be an int, got {value!r}")
    return bool(value)


# ---------------------------------------------------------------------------------------------
# reductions


def _identity_max(dtype: np.dtype) -> object:
    """The max over an empty set: -inf, the type's minimum, or False."""
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _identity_min(dtype: np.dtype) -> object:
    """The min over an empty set: +inf, the type's maximum, or True."""
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


def _sum(op: Op, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    work = np.float32 if x.dtype.name in LOW_FLOATS else x.dtype
    return np.asarray(np.sum(x, axis=axes, dtype=work, keepdims=keep)).astype(x.dtype)


def _prod(op: Op, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    work = np.float32 if x.dtype.name in LOW_FLOATS else x.dtype
    return np.asarray(np.prod(x, axis=axes, dtype=work, keepdims=keep)).astype(x.dtype)


def _mean(op: Op, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    count = 1
    for a in axes:
        count *= x.shape[a]
    if count == 0 and _out_size(x, axes) > 0:
        # ONNX leaves it undefined (numpy gives nan, onnxruntime 0): not ours to pick.
        raise fail(
            op,
            f"the mean over an empty set is undefined (input {list(x.shape)}, axes {list(axes)})",
        )
    if x.dtype.kind in "iu":
        total = np.sum(x, axis=axes, dtype=x.dtype, keepdims=keep)
        # Integer division truncating towards zero, as C++ (onnxruntime) divides.
        quotient = np.abs(total) // max(count, 1)
        return np.asarray(np.where(total < 0, -quotient, quotient)).astype(x.dtype)
    work = np.float32 if x.dtype.name in LOW_FLOATS else x.dtype
    total = np.sum(x, axis=axes, dtype=work, keepdims=keep)
    return np.asarray(total / np.asarray(max(count, 1), dtype=work)).astype(x.dtype)


def _out_size(x: np.ndarray, axes: tuple[int, ...]) -> int:
    """Elements of the reduction's result."""
    size = 1
    for i, d in enumerate(x.shape):
        if i not in axes:
            size *= d
    return size


Reducer = Callable[[Op, np.ndarray, tuple[int, ...], bool], np.ndarray]
"""(op, x, axes as sorted indices, keepdims) -> reduced array of x's dtype."""


def _extreme(identity: Callable[[np.dtype], object], ufunc: np.ufunc) -> Reducer:
    def reduce(op: Op, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            shape = [1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes]
            return np.full(shape, identity(x.dtype), dtype=x.dtype)
        return np.asarray(ufunc.reduce(x, axis=axes, keepdims=keep)).astype(x.dtype)

    return reduce


_max: Reducer = _extreme(_identity_max, np.maximum)
_min: Reducer = _extreme(_identity_min, np.minimum)


def _reduce_axes(op: Op, axes: Sequence[int], rank: int, *, negative: bool) -> tuple[int, ...]:
    found = []
    for a in axes:
        if a < 0 and not negative:
            raise fail(op, f"axes {list(axes)} has a negative axis (this version takes >= 0)")
        if not -max(rank, 1) <= a < max(rank, 1):
            raise fail(op, f"axis {a} is outside [{-rank}, {rank - 1}] for rank {rank}")
        found.append(a + rank if a < 0 else a)
    if rank == 0:  # a scalar reduces over nothing whatever the axes say (0 or -1)
        return ()
    if len(set(found)) != len(found):
        raise fail(op, f"axes {list(axes)} repeat an axis (rank {rank})")
    return tuple(sorted(found))


def _reduce(
    op: Op,
    x: np.ndarray,
    reducer: Reducer,
    axes: Sequence[int] | None,
    *,
    negative: bool,
    noop: bool = False,
) -> list[np.ndarray]:
    """``axes`` None or empty: every axis, or none when ``noop`` (noop_with_empty_axes)."""
    keep = _flag(op, "keepdims", 1)
    if not axes:
        if noop:
            return [np.array(x, copy=True)]
        found = tuple(range(x.ndim))
    else:
        found = _reduce_axes(op, axes, x.ndim, negative=negative)
    return [reducer(op, x, found, keep)]


def _attr_axes(op: Op) -> list[int] | None:
    axes = op.attr("axes")
    if axes is None:
        return None
    if not isinstance(axes, list | tuple) or not all(isinstance(a, int) for a in axes):
        raise fail(op, f"attribute axes must be a list of ints, got {axes!r}")
    return list(axes)


def _input_axes(op: Op, inputs: Inputs) -> list[int] | None:
    given = inputs[1] if len(inputs) > 1 else None
    if given is None:
        return None
    array = np.asarray(given)
    if array.dtype.kind not in "iu" or array.ndim > 1:
        raise fail(op, f"axes must be a 1-D integer tensor, got {array.dtype}{list(array.shape)}")
    return [int(a) for a in array.reshape(-1)]


def _by_attribute(reducer: Reducer, *, negative: bool) -> Callable[[Op, Inputs], list[np.ndarray]]:
    def run(op: Op, inputs: Inputs) -> list[np.ndarray]:
        x = required_input(op, inputs, 0, "data")
        return _reduce(op, x, reducer, _attr_axes(op), negative=negative)

    return run


def _by_input(reducer: Reducer) -> Callable[[Op, Inputs], list[np.ndarray]]:
    def run(op: Op, inputs: Inputs) -> list[np.ndarray]:
        x = required_input(op, inputs, 0, "data")
        noop = _flag(op, "noop_with_empty_axes", 0)
        return _reduce(op, x, reducer, _input_axes(op, inputs), negative=True, noop=noop)

    return run


@kernel("ReduceSum", versions=(1,))
def reduce_sum_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceSum-1: the ``axes`` attribute (>= 0; absent: all), ``keepdims`` default 1; an
    empty set sums to 0."""
    return _by_attribute(_sum, negative=False)(op, inputs)


@kernel("ReduceSum", versions=(11,))
def reduce_sum_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceSum-11: negative axes count from the back."""
    return _by_attribute(_sum, negative=True)(op, inputs)


@kernel("ReduceSum", versions=(13,))
def reduce_sum_13(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceSum-13: optional ``axes`` input; absent or empty reduces all axes, or none with
    ``noop_with_empty_axes=1``."""
    return _by_input(_sum)(op, inputs)


@kernel("ReduceMean", versions=(1,))
def reduce_mean_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMean-1: the ``axes`` attribute (>= 0); integer means truncate towards zero; the
    mean of an empty set (undefined) is an error."""
    return _by_attribute(_mean, negative=False)(op, inputs)


@kernel("ReduceMean", versions=(11, 13))
def reduce_mean_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMean-11/13: negative axes count from the back."""
    return _by_attribute(_mean, negative=True)(op, inputs)


@kernel("ReduceMean", versions=(18,))
def reduce_mean_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMean-18: optional ``axes`` input and ``noop_with_empty_axes``."""
    return _by_input(_mean)(op, inputs)


@kernel("ReduceMax", versions=(1,))
def reduce_max_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMax-1: the ``axes`` attribute (>= 0); an empty set gives -inf (floats) or the
    type's minimum."""
    return _by_attribute(_max, negative=False)(op, inputs)


@kernel("ReduceMax", versions=(11, 12, 13))
def reduce_max_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMax-11/12/13: negative axes count from the back."""
    return _by_attribute(_max, negative=True)(op, inputs)


@kernel("ReduceMax", versions=(18, 20))
def reduce_max_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMax-18/20: optional ``axes`` input, ``noop_with_empty_axes``; bool (20): an empty
    set gives False."""
    return _by_input(_max)(op, inputs)


@kernel("ReduceMin", versions=(1,))
def reduce_min_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMin-1: the ``axes`` attribute (>= 0); an empty set gives +inf (floats) or the
    type's maximum."""
    return _by_attribute(_min, negative=False)(op, inputs)


@kernel("ReduceMin", versions=(11, 12, 13))
def reduce_min_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMin-11/12/13: negative axes count from the back."""
    return _by_attribute(_min, negative=True)(op, inputs)


@kernel("ReduceMin", versions=(18, 20))
def reduce_min_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceMin-18/20: optional ``axes`` input, ``noop_with_empty_axes``; bool (20): an empty
    set gives True."""
    return _by_input(_min)(op, inputs)


@kernel("ReduceProd", versions=(1,))
def reduce_prod_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceProd-1: the ``axes`` attribute (>= 0); an empty set multiplies to 1."""
    return _by_attribute(_prod, negative=False)(op, inputs)


@kernel("ReduceProd", versions=(11, 13))
def reduce_prod_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceProd-11/13: negative axes count from the back."""
    return _by_attribute(_prod, negative=True)(op, inputs)


@kernel("ReduceProd", versions=(18,))
def reduce_prod_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ReduceProd-18: optional ``axes`` input and ``noop_with_empty_axes``."""
    return _by_input(_prod)(op, inputs)


# ---------------------------------------------------------------------------------------------
# MatMul, Gemm


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's matmul in the inputs' type; float16/bfloat16 through float32."""
    if a.dtype.name in LOW_FLOATS:
        return np.matmul(a.astype(np.float32), b.astype(np.float32))
    return np.matmul(a, b)


@kernel("MatMul", versions=(1, 9, 13))
def matmul_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """MatMul: numpy.matmul (1-D operands promoted and the added dim removed, batch dims
    broadcast)."""
    a = required_input(op, inputs, 0, "A")
    b = required_input(op, inputs, 1, "B")
    if a.ndim == 0 or b.ndim == 0:
        raise fail(op, f"cannot multiply scalars: A {list(a.shape)}, B {list(b.shape)}")
    if a.dtype != b.dtype:
        raise fail(op, f"A is {a.dtype}, B is {b.dtype}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise fail(op, f"A {list(a.shape)} and B {list(b.shape)}: inner dims {k_a} != {k_b}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise fail(
            op, f"batch dims of A {list(a.shape)} and B {list(b.shape)} do not broadcast"
        ) from None
    return [np.asarray(_matmul(a, b)).astype(a.dtype)]


def _gemm(op: Op, inputs: Inputs, *, c_optional: bool, broadcast: bool) -> list[np.ndarray]:
    a = required_input(op, inputs, 0, "A")
    b = required_input(op, inputs, 1, "B")
    c = inputs[2] if len(inputs) > 2 else None
    if c is None and not c_optional:
        raise fail(op, "input 2 (C) is required before Gemm-11")
    if a.ndim != 2 or b.ndim != 2:
        raise fail(op, f"A {list(a.shape)} and B {list(b.shape)} must be matrices")
    if _flag(op, "transA", 0):
        a = a.T
    if _flag(op, "transB", 0):
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise fail(
            op,
            f"A' {list(a.shape)} and B' {list(b.shape)}: inner dims {a.shape[1]} != {b.shape[0]}",
        )
    alpha = op.attr("alpha", 1.0)
    beta = op.attr("beta", 1.0)
    dtype = a.dtype
    work = np.dtype(np.float32) if dtype.name in LOW_FLOATS else dtype
    # alpha and beta are cast to the work type (for integer Gemm: truncated).
    scale_a = np.asarray(alpha).astype(work)
    scale_b = np.asarray(beta).astype(work)
    out = np.matmul(a.astype(work), b.astype(work)) * scale_a
    rows, cols = out.shape
    if c is not None and beta != 0:
        c = np.asarray(c)
        if not broadcast and c.shape != (rows, cols):
            raise fail(op, f"C {list(c.shape)} must be [{rows}, {cols}] with broadcast=0")
        try:
            c_full = np.broadcast_to(c.astype(work), (rows, cols))
        except ValueError:
            raise fail(op, f"C {list(c.shape)} does not broadcast to [{rows}, {cols}]") from None
        out = out + c_full * scale_b
    return [np.asarray(out).astype(dtype)]


@kernel("Gemm", versions=(1, 6))
def gemm_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Gemm-1/6: ``alpha * A' @ B' + beta * C``; C is required and must be [M, N] unless
    ``broadcast=1``."""
    return _gemm(op, inputs, c_optional=False, broadcast=_flag(op, "broadcast", 0))


@kernel("Gemm", versions=(7, 9))
def gemm_7(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Gemm-7/9: C (required) broadcasts one way to [M, N]."""
    return _gemm(op, inputs, c_optional=False, broadcast=True)


@kernel("Gemm", versions=(11, 13))
def gemm_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Gemm-11/13: C is optional."""
    return _gemm(op, inputs, c_optional=True, broadcast=True)
