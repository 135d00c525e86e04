"""Numpy kernels: tensor ops (shape, data movement, indexing), every schema version.

Every kernel returns arrays of its own (never views of an input, which may be a read-only
window of a model file) with the input's dtype, and raises ``KernelError`` naming the op and the
numbers when the inputs break the op's rules.
"""

from __future__ import annotations

__all__ = [
    "argmax_1",
    "argmax_11",
    "argmax_12",
    "argmin_1",
    "argmin_11",
    "argmin_12",
    "concat_1",
    "concat_4",
    "concat_11",
    "constant_of_shape_9",
    "cumsum_11",
    "expand_8",
    "flatten_1",
    "flatten_11",
    "gather_1",
    "gather_elements_11",
    "identity_1",
    "nonzero_9",
    "pad_1",
    "pad_2",
    "pad_11",
    "pad_18",
    "pad_19",
    "range_11",
    "range_27",
    "reshape_1",
    "reshape_5",
    "reshape_14",
    "scatter_nd_11",
    "scatter_nd_16",
    "scatter_nd_18",
    "shape_1",
    "shape_15",
    "size_1",
    "slice_1",
    "slice_10",
    "slice_11",
    "split_1",
    "split_2",
    "split_11",
    "split_13",
    "split_18",
    "squeeze_1",
    "squeeze_11",
    "squeeze_13",
    "tile_1",
    "tile_6",
    "topk_1",
    "topk_10",
    "topk_11",
    "transpose_1",
    "trilu_14",
    "unsqueeze_1",
    "unsqueeze_11",
    "unsqueeze_13",
]

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxforge.ir import Op, Tensor
from onnxforge.kernels import kernel
from onnxforge.kernels._common import LOW_FLOATS, Inputs, fail, required_input

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# helpers


def _own(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy: outputs never alias an input."""
    return np.array(array, copy=True, order="C")


def _optional(inputs: Inputs, index: int) -> np.ndarray | None:
    if index >= len(inputs) or inputs[index] is None:
        return None
    return np.asarray(inputs[index])


def _int_list(op: Op, array: np.ndarray, name: str) -> list[int]:
    """A 1-D (or scalar) integer tensor as Python ints."""
    if array.dtype.kind not in "iu":
        raise fail(op, f"{name} must be an integer tensor, got {array.dtype}")
    if array.ndim > 1:
        raise fail(op, f"{name} must be 1-D, got shape {list(array.shape)}")
    return [int(v) for v in array.reshape(-1)]


def _scalar_int(op: Op, array: np.ndarray, name: str) -> int:
    """A 0-D (or one-element 1-D) integer tensor as a Python int."""
    values = _int_list(op, array, name)
    if len(values) != 1:
        raise fail(op, f"{name} must hold one value, got {values}")
    return values[0]


def _attr_ints(op: Op, name: str) -> list[int] | None:
    value = op.attr(name)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(v, int) for v in value):
        raise fail(op, f"attribute {name} must be a list of ints, got {value!r}")
    return [int(v) for v in value]


def _attr_int(op: Op, name: str, default: int | None = None) -> int:
    value = op.attr(name, default)
    if not isinstance(value, int):
        raise fail(op, f"attribute {name} must be an int, got {value!r}")
    return value


def _axis(op: Op, axis: int, rank: int, *, negative: bool = True, what: str = "axis") -> int:
    """``axis`` as an index in [0, rank); ``negative``: whether the version allows axis < 0."""
    if axis < 0 and not negative:
        raise fail(op, f"{what} {axis} is negative (this version takes [0, {rank - 1}])")
    if not -rank <= axis < rank:
        raise fail(op, f"{what} {axis} is outside [{-rank}, {rank - 1}] for rank {rank}")
    return axis + rank if axis < 0 else axis


def _axes(op: Op, axes: Sequence[int], rank: int, *, negative: bool = True) -> list[int]:
    """Distinct axes as indices in [0, rank)."""
    found = [_axis(op, a, rank, negative=negative) for a in axes]
    if len(set(found)) != len(found):
        raise fail(op, f"axes {list(axes)} repeat an axis (rank {rank})")
    return found


def _shape_of(array: np.ndarray) -> str:
    return str(list(array.shape))


def _zero_of(dtype: np.dtype) -> object:
    """0, False or the empty string in ``dtype``."""
    if dtype.kind in "OUS":
        return ""
    return np.zeros((), dtype=dtype)[()]


# ---------------------------------------------------------------------------------------------
# Split


def _split(op: Op, x: np.ndarray, axis: int, sizes: Sequence[int]) -> list[np.ndarray]:
    """Parts of ``x`` along ``axis`` (an index) with the given lengths (checked here)."""
    dim = x.shape[axis]
    count = len(op._outputs)
    if len(sizes) != count:
        raise fail(op, f"split {list(sizes)} has {len(sizes)} sizes for {count} outputs")
    if any(s < 0 for s in sizes):
        raise fail(op, f"split {list(sizes)} has a negative size")
    if sum(sizes) != dim:
        raise fail(
            op,
            f"split {list(sizes)} sums to {sum(sizes)}, but dim {axis} of input "
            f"{_shape_of(x)} is {dim}",
        )
    parts = []
    start = 0
    for size in sizes:
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + size)
        parts.append(_own(x[tuple(index)]))
        start += size
    return parts


def _equal_parts(op: Op, x: np.ndarray, axis: int) -> list[int]:
    """No sizes given: as many equal parts as the node has outputs."""
    count = len(op._outputs)
    dim = x.shape[axis]
    if count < 1:
        raise fail(op, "the node has no outputs")
    if dim % count:
        raise fail(
            op,
            f"dim {axis} of input {_shape_of(x)} is {dim}, which does not split into "
            f"{count} equal parts ({count} outputs, no split sizes)",
        )
    return [dim // count] * count


def _split_axis(op: Op, x: np.ndarray, *, negative: bool) -> int:
    if x.ndim == 0:
        raise fail(op, "cannot split a scalar")
    return _axis(op, _attr_int(op, "axis", 0), x.ndim, negative=negative)


@kernel("Split", versions=(1,))
def split_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Split-1: lengths from the ``split`` attribute or the optional second input (a float
    tensor of type T), not both; else equal parts. Axis default 0, no negative axes."""
    x = required_input(op, inputs, 0, "input")
    axis = _split_axis(op, x, negative=False)
    attr = _attr_ints(op, "split")
    given = _optional(inputs, 1)
    if given is not None:
        if attr is not None:
            raise fail(op, f"split is given both as attribute {attr} and as input")
        values = given.reshape(-1)
        if values.dtype.kind == "f" and not np.all(values == np.round(values)):
            raise fail(op, f"split input {values.tolist()} holds non-integers")
        attr = [int(v) for v in values]
    sizes = attr if attr else _equal_parts(op, x, axis)
    return _split(op, x, axis, sizes)


def _split_attribute(op: Op, inputs: Inputs, *, negative: bool) -> list[np.ndarray]:
    x = required_input(op, inputs, 0, "input")
    axis = _split_axis(op, x, negative=negative)
    sizes = _attr_ints(op, "split")
    return _split(op, x, axis, sizes if sizes else _equal_parts(op, x, axis))


@kernel("Split", versions=(2,))
def split_2(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Split-2: lengths from the ``split`` attribute, else equal parts; axis >= 0."""
    return _split_attribute(op, inputs, negative=False)


@kernel("Split", versions=(11,))
def split_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Split-11: as Split-2, and a negative axis counts from the back."""
    return _split_attribute(op, inputs, negative=True)


@kernel("Split", versions=(13,))
def split_13(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Split-13: lengths from the optional int64 ``split`` input, else equal parts."""
    x = required_input(op, inputs, 0, "input")
    axis = _split_axis(op, x, negative=True)
    given = _optional(inputs, 1)
    sizes = _int_list(op, given, "split") if given is not None else None
    return _split(op, x, axis, sizes if sizes is not None else _equal_parts(op, x, axis))


@kernel("Split", versions=(18,))
def split_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Split-18: the ``split`` input or ``num_outputs``, one of them. With ``num_outputs`` n
    the parts are ceil(dim / n) long and the last one is what is left (smaller, maybe 0);
    a dim too short for that (5 into 4: 2, 2, 2, -1) is an error."""
    x = required_input(op, inputs, 0, "input")
    axis = _split_axis(op, x, negative=True)
    given = _optional(inputs, 1)
    chunks = op.attr("num_outputs")
    if given is not None and chunks is not None:
        raise fail(op, f"both the split input and num_outputs ({chunks}) are given")
    if given is not None:
        return _split(op, x, axis, _int_list(op, given, "split"))
    if chunks is None:
        raise fail(op, "neither the split input nor num_outputs is given")
    if not isinstance(chunks, int) or chunks < 1:
        raise fail(op, f"num_outputs must be a positive int, got {chunks!r}")
    count = len(op._outputs)
    if chunks != count:
        raise fail(op, f"num_outputs is {chunks}, but the node has {count} outputs")
    dim = x.shape[axis]
    size = -(-dim // chunks)
    last = dim - size * (chunks - 1)
    if last < 0:
        raise fail(
            op,
            f"dim {axis} of input {_shape_of(x)} is {dim}: {chunks} parts of {size} with a "
            f"smaller last one do not fit ({chunks - 1} parts of {size} already take "
            f"{size * (chunks - 1)})",
        )
    return _split(op, x, axis, [size] * (chunks - 1) + [last])


# ---------------------------------------------------------------------------------------------
# Shape, Size, Identity


@kernel("Shape", versions=(1, 13))
def shape_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Shape-1 and -13: the input's shape as int64."""
    x = required_input(op, inputs, 0, "data")
    return [np.array(x.shape, dtype=np.int64)]


@kernel("Shape", versions=(15, 19, 21, 23, 24, 25))
def shape_15(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Shape-15+: dims ``start`` (default 0) to ``end`` (default rank, exclusive); negative
    values count from the back, then both are clamped to [0, rank]."""
    x = required_input(op, inputs, 0, "data")
    rank = x.ndim
    start = _attr_int(op, "start", 0)
    end = _attr_int(op, "end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return [np.array(x.shape[start:end], dtype=np.int64)]


@kernel("Size", versions=(1, 13, 19, 21, 23, 24, 25))
def size_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Size: the number of elements, an int64 scalar."""
    x = required_input(op, inputs, 0, "data")
    return [np.array(x.size, dtype=np.int64)]


@kernel("Identity", versions=(1, 13, 14, 16, 19, 21, 23, 24, 25))
def identity_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Identity: a copy of a tensor (sequences and optionals are no tensors: an error)."""
    x = inputs[0] if inputs else None
    if not isinstance(x, np.ndarray | np.generic):
        raise fail(op, f"the input is a {type(x).__name__}, not a tensor")
    return [_own(np.asarray(x))]


# ---------------------------------------------------------------------------------------------
# Gather, GatherElements, ScatterND


def _indices(op: Op, indices: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Indices in [-dim, dim) as int64 in [0, dim)."""
    if indices.dtype.kind not in "iu":
        raise fail(op, f"{what} must be integers, got {indices.dtype}")
    idx = indices.astype(np.int64)
    if idx.size:
        low, high = int(idx.min()), int(idx.max())
        if low < -dim or high >= dim:
            bad = low if low < -dim else high
            raise fail(op, f"{what} holds {bad}, outside [{-dim}, {dim - 1}]")
    return np.where(idx < 0, idx + dim, idx)


@kernel("Gather", versions=(1, 11, 13))
def gather_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Gather: entries of ``data`` along ``axis`` at ``indices`` (negative ones count back)."""
    data = required_input(op, inputs, 0, "data")
    indices = required_input(op, inputs, 1, "indices")
    if data.ndim == 0:
        raise fail(op, "cannot gather from a scalar")
    axis = _axis(op, _attr_int(op, "axis", 0), data.ndim)
    idx = _indices(op, indices, data.shape[axis], f"indices (dim {axis} is {data.shape[axis]})")
    return [np.take(data, idx, axis=axis)]


@kernel("GatherElements", versions=(11, 13))
def gather_elements_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """GatherElements: ``out[i][j] = data[indices[i][j]][j]`` (axis 0), shaped like
    ``indices``, whose other dims may be shorter than ``data``'s."""
    data = required_input(op, inputs, 0, "data")
    indices = required_input(op, inputs, 1, "indices")
    if data.ndim == 0 or indices.ndim != data.ndim:
        raise fail(
            op, f"indices {_shape_of(indices)} must have the rank of data {_shape_of(data)} (>= 1)"
        )
    axis = _axis(op, _attr_int(op, "axis", 0), data.ndim)
    for d, (n, m) in enumerate(zip(indices.shape, data.shape, strict=True)):
        if d != axis and n > m:
            raise fail(
                op,
                f"indices {_shape_of(indices)} is longer than data {_shape_of(data)} in dim {d}",
            )
    idx = _indices(op, indices, data.shape[axis], f"indices (dim {axis} is {data.shape[axis]})")
    window = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))
    return [np.take_along_axis(data[window], idx, axis=axis)]


def _scatter_nd(op: Op, inputs: Inputs, reduction: str) -> list[np.ndarray]:
    data = required_input(op, inputs, 0, "data")
    indices = required_input(op, inputs, 1, "indices")
    updates = required_input(op, inputs, 2, "updates")
    if data.ndim == 0 or indices.ndim == 0:
        raise fail(op, f"data {_shape_of(data)} and indices {_shape_of(indices)} need rank >= 1")
    if indices.dtype.kind not in "iu":
        raise fail(op, f"indices must be integers, got {indices.dtype}")
    k = indices.shape[-1]
    if k > data.ndim:
        raise fail(op, f"indices {_shape_of(indices)} index {k} dims of data {_shape_of(data)}")
    want = indices.shape[:-1] + data.shape[k:]
    if updates.shape != want:
        raise fail(
            op,
            f"updates {_shape_of(updates)} must be {list(want)} for data {_shape_of(data)} "
            f"and indices {_shape_of(indices)}",
        )
    rows = indices.astype(np.int64).reshape(-1, k)
    for d in range(k):
        rows[:, d] = _indices(op, rows[:, d], data.shape[d], f"indices (dim {d})")
    values = updates.reshape((rows.shape[0], *data.shape[k:]))
    combine = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    out = _own(data)
    if reduction == "none" and k:  # duplicate indices are undefined: the last one wins
        out[tuple(rows.T)] = values
        return [out]
    # One update at a time, in index order, f applied in T: duplicates accumulate.
    for row, value in zip(rows, values, strict=True):
        at = tuple(int(i) for i in row)
        out[at] = value if reduction == "none" else combine[reduction](out[at], value)
    return [out]


def _reduction(op: Op, allowed: Sequence[str]) -> str:
    reduction = op.attr("reduction", "none")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in allowed:
        raise fail(op, f"reduction {reduction!r} is none of {', '.join(allowed)}")
    return str(reduction)


@kernel("ScatterND", versions=(11, 13))
def scatter_nd_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ScatterND-11/13: a copy of ``data`` with ``updates`` written at the k-tuples of
    ``indices`` (negative ones count back)."""
    return _scatter_nd(op, inputs, "none")


@kernel("ScatterND", versions=(16,))
def scatter_nd_16(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ScatterND-16: ``reduction`` none (default), add or mul."""
    return _scatter_nd(op, inputs, _reduction(op, ("none", "add", "mul")))


@kernel("ScatterND", versions=(18,))
def scatter_nd_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ScatterND-18: ``reduction`` also max or min."""
    return _scatter_nd(op, inputs, _reduction(op, ("none", "add", "mul", "max", "min")))


# ---------------------------------------------------------------------------------------------
# Concat, Slice


def _concat(op: Op, inputs: Inputs, axis: object, *, negative: bool) -> list[np.ndarray]:
    arrays = [np.asarray(a) for a in inputs if a is not None]
    if not arrays:
        raise fail(op, "no inputs")
    if not isinstance(axis, int):
        raise fail(op, f"attribute axis must be an int, got {axis!r}")
    rank = arrays[0].ndim
    if rank == 0:
        raise fail(op, "cannot concatenate scalars")
    index = _axis(op, axis, rank, negative=negative)
    first = arrays[0].shape
    for a in arrays:
        if a.ndim != rank or any(
            n != m for d, (n, m) in enumerate(zip(a.shape, first, strict=True)) if d != index
        ):
            shapes = ", ".join(_shape_of(b) for b in arrays)
            raise fail(op, f"inputs {shapes} differ outside axis {index}")
    return [np.concatenate(arrays, axis=index)]


@kernel("Concat", versions=(1,))
def concat_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Concat-1: inputs of one rank joined along ``axis`` (default 1, >= 0)."""
    return _concat(op, inputs, op.attr("axis", 1), negative=False)


@kernel("Concat", versions=(4,))
def concat_4(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Concat-4: ``axis`` is required (>= 0)."""
    return _concat(op, inputs, op.attr("axis"), negative=False)


@kernel("Concat", versions=(11, 13))
def concat_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Concat-11/13: a negative ``axis`` counts from the back."""
    return _concat(op, inputs, op.attr("axis"), negative=True)


def _clamped(op: Op, axis: int, dim: int, *, start: int, end: int, step: int) -> slice:
    """ONNX's clamping: negative start/end count back, then start goes to [0, dim] and end
    to [0, dim] for positive steps, [0, dim-1] and [-1, dim-1] for negative ones."""
    if step == 0:
        raise fail(op, f"step 0 for axis {axis}")
    if dim == 0:
        return slice(0, 0)
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)  # end -1: through index 0


def _slice(
    op: Op,
    data: np.ndarray,
    *,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
    negative: bool,
) -> np.ndarray:
    n = len(starts)
    if len(ends) != n:
        raise fail(op, f"starts {list(starts)} and ends {list(ends)} differ in length")
    if axes is None:
        if n > data.ndim:
            raise fail(op, f"{n} starts for rank {data.ndim}")
        axes = list(range(n))
    elif len(axes) != n:
        raise fail(op, f"axes {list(axes)} and starts {list(starts)} differ in length")
    if steps is None:
        steps = [1] * n
    elif len(steps) != n:
        raise fail(op, f"steps {list(steps)} and starts {list(starts)} differ in length")
    index = [slice(None)] * data.ndim
    for axis, first, last, step in zip(
        _axes(op, axes, data.ndim, negative=negative), starts, ends, steps, strict=True
    ):
        index[axis] = _clamped(op, axis, data.shape[axis], start=first, end=last, step=step)
    return _own(data[tuple(index)])


@kernel("Slice", versions=(1,))
def slice_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Slice-1: ``starts``, ``ends`` and optional ``axes`` attributes, step 1."""
    data = required_input(op, inputs, 0, "data")
    starts = _attr_ints(op, "starts")
    ends = _attr_ints(op, "ends")
    if starts is None or ends is None:
        raise fail(op, "attributes starts and ends are required")
    axes = _attr_ints(op, "axes")
    return [_slice(op, data, starts=starts, ends=ends, axes=axes, steps=None, negative=False)]


def _slice_inputs(op: Op, inputs: Inputs, *, negative: bool) -> list[np.ndarray]:
    data = required_input(op, inputs, 0, "data")
    starts = _int_list(op, required_input(op, inputs, 1, "starts"), "starts")
    ends = _int_list(op, required_input(op, inputs, 2, "ends"), "ends")
    axes_in = _optional(inputs, 3)
    steps_in = _optional(inputs, 4)
    axes = None if axes_in is None else _int_list(op, axes_in, "axes")
    steps = None if steps_in is None else _int_list(op, steps_in, "steps")
    return [_slice(op, data, starts=starts, ends=ends, axes=axes, steps=steps, negative=negative)]


@kernel("Slice", versions=(10,))
def slice_10(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Slice-10: ``starts``, ``ends``, optional ``axes`` (>= 0) and ``steps`` inputs. Indices
    count back when negative and are clamped to the dim ([0, dim] for positive steps,
    [-1, dim-1] for negative ones)."""
    return _slice_inputs(op, inputs, negative=False)


@kernel("Slice", versions=(11, 13))
def slice_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Slice-11/13: as Slice-10, and negative axes count from the back."""
    return _slice_inputs(op, inputs, negative=True)


# ---------------------------------------------------------------------------------------------
# Squeeze, Unsqueeze, Reshape, Flatten, Transpose


def _squeeze(op: Op, data: np.ndarray, axes: Sequence[int] | None, negative: bool) -> np.ndarray:
    """No axes (absent or empty, as onnxruntime reads an empty list): every size-1 dim."""
    if not axes:
        return _own(data.reshape([d for d in data.shape if d != 1]))
    found = _axes(op, axes, data.ndim, negative=negative)
    for a in found:
        if data.shape[a] != 1:
            raise fail(op, f"dim {a} of input {_shape_of(data)} is {data.shape[a]}, not 1")
    return _own(data.reshape([d for i, d in enumerate(data.shape) if i not in found]))


@kernel("Squeeze", versions=(1,))
def squeeze_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Squeeze-1: drop the size-1 dims in the ``axes`` attribute (>= 0; all size-1 dims when
    absent)."""
    data = required_input(op, inputs, 0, "data")
    return [_squeeze(op, data, _attr_ints(op, "axes"), negative=False)]


@kernel("Squeeze", versions=(11,))
def squeeze_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Squeeze-11: as Squeeze-1, and negative axes count from the back."""
    data = required_input(op, inputs, 0, "data")
    return [_squeeze(op, data, _attr_ints(op, "axes"), negative=True)]


@kernel("Squeeze", versions=(13, 21, 23, 24, 25))
def squeeze_13(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Squeeze-13+: ``axes`` is an optional input."""
    data = required_input(op, inputs, 0, "data")
    axes = _optional(inputs, 1)
    return [
        _squeeze(op, data, None if axes is None else _int_list(op, axes, "axes"), negative=True)
    ]


def _unsqueeze(
    op: Op, data: np.ndarray, axes: Sequence[int], *, negative: bool = True
) -> np.ndarray:
    rank = data.ndim + len(axes)
    found = set(_axes(op, axes, rank, negative=negative))
    dims = iter(data.shape)
    shape = [1 if i in found else next(dims) for i in range(rank)]
    return _own(data.reshape(shape))


def _unsqueeze_attribute(op: Op, inputs: Inputs, *, negative: bool) -> list[np.ndarray]:
    data = required_input(op, inputs, 0, "data")
    axes = _attr_ints(op, "axes")
    if axes is None:
        raise fail(op, "attribute axes is required")
    return [_unsqueeze(op, data, axes, negative=negative)]


@kernel("Unsqueeze", versions=(1,))
def unsqueeze_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Unsqueeze-1: insert size-1 dims at the ``axes`` attribute's output positions (>= 0)."""
    return _unsqueeze_attribute(op, inputs, negative=False)


@kernel("Unsqueeze", versions=(11,))
def unsqueeze_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Unsqueeze-11: as Unsqueeze-1, and negative axes count from the back of the output."""
    return _unsqueeze_attribute(op, inputs, negative=True)


@kernel("Unsqueeze", versions=(13, 21, 23, 24, 25))
def unsqueeze_13(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Unsqueeze-13+: ``axes`` is an input."""
    data = required_input(op, inputs, 0, "data")
    axes = _int_list(op, required_input(op, inputs, 1, "axes"), "axes")
    return [_unsqueeze(op, data, axes)]


def _reshape(op: Op, data: np.ndarray, shape: Sequence[int], allowzero: bool) -> np.ndarray:
    asked = list(shape)
    out = list(shape)
    if sum(1 for d in out if d == -1) > 1:
        raise fail(op, f"shape {asked} has more than one -1")
    if any(d < -1 for d in out):
        raise fail(op, f"shape {asked} has a dim below -1")
    if allowzero and 0 in out and -1 in out:
        raise fail(op, f"shape {asked} has both 0 and -1 with allowzero=1")
    if not allowzero:
        for i, d in enumerate(out):
            if d == 0:
                if i >= data.ndim:
                    raise fail(
                        op,
                        f"shape {asked} copies dim {i}, but the input {_shape_of(data)} "
                        f"has rank {data.ndim}",
                    )
                out[i] = data.shape[i]
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or data.size % known:
            raise fail(op, f"shape {asked} does not fit input {_shape_of(data)}")
        out[out.index(-1)] = data.size // known
    if math.prod(out) != data.size:
        raise fail(
            op,
            f"shape {asked} ({out}, {math.prod(out)} elements) does not fit input "
            f"{_shape_of(data)} ({data.size} elements)",
        )
    return _own(data.reshape(out))


@kernel("Reshape", versions=(1,))
def reshape_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Reshape-1: the ``shape`` attribute; 0 copies the input's dim, -1 takes the rest."""
    data = required_input(op, inputs, 0, "data")
    shape = _attr_ints(op, "shape")
    if shape is None:
        raise fail(op, "attribute shape is required")
    return [_reshape(op, data, shape, allowzero=False)]


@kernel("Reshape", versions=(5, 13))
def reshape_5(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Reshape-5/13: the ``shape`` input; 0 copies the input's dim, -1 takes the rest."""
    data = required_input(op, inputs, 0, "data")
    shape = _int_list(op, required_input(op, inputs, 1, "shape"), "shape")
    return [_reshape(op, data, shape, allowzero=False)]


@kernel("Reshape", versions=(14, 19, 21, 23, 24, 25))
def reshape_14(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Reshape-14+: with ``allowzero=1`` a 0 in the shape is a zero-length dim."""
    data = required_input(op, inputs, 0, "data")
    shape = _int_list(op, required_input(op, inputs, 1, "shape"), "shape")
    return [_reshape(op, data, shape, allowzero=bool(_attr_int(op, "allowzero", 0)))]


def _flatten(op: Op, inputs: Inputs, *, negative: bool) -> list[np.ndarray]:
    data = required_input(op, inputs, 0, "input")
    rank = data.ndim
    axis = _attr_int(op, "axis", 1)
    low = -rank if negative else 0
    if not low <= axis <= rank:
        raise fail(op, f"axis {axis} is outside [{low}, {rank}] for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    outer = math.prod(data.shape[:axis])
    return [_own(data.reshape(outer, math.prod(data.shape[axis:])))]


@kernel("Flatten", versions=(1, 9))
def flatten_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Flatten-1/9: dims before ``axis`` (in [0, r], default 1) into one, the rest into
    another."""
    return _flatten(op, inputs, negative=False)


@kernel("Flatten", versions=(11, 13, 21, 23, 24, 25))
def flatten_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Flatten-11+: ``axis`` in [-r, r]."""
    return _flatten(op, inputs, negative=True)


@kernel("Transpose", versions=(1, 13, 21, 23, 24, 25))
def transpose_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Transpose: dims permuted by ``perm`` (default: reversed)."""
    data = required_input(op, inputs, 0, "data")
    perm = _attr_ints(op, "perm")
    if perm is None:
        perm = list(range(data.ndim))[::-1]
    if sorted(perm) != list(range(data.ndim)):
        raise fail(op, f"perm {perm} is not a permutation of the {data.ndim} dims")
    return [_own(np.transpose(data, perm))]


# ---------------------------------------------------------------------------------------------
# ConstantOfShape, Range, Expand, Tile


def _dims(op: Op, array: np.ndarray, name: str) -> list[int]:
    dims = _int_list(op, array, name)
    if any(d < 0 for d in dims):
        raise fail(op, f"{name} {dims} has a negative dim")
    return dims


@kernel("ConstantOfShape", versions=(9, 20, 21, 23, 24, 25))
def constant_of_shape_9(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ConstantOfShape: a tensor of the input's shape filled with the one-element ``value``
    (default float32 0)."""
    dims = _dims(op, required_input(op, inputs, 0, "input"), "shape")
    value = op.attr("value")
    if value is None:
        fill = np.zeros((), dtype=np.float32)
    else:
        array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        if array.size != 1:
            raise fail(op, f"value must hold one element, got shape {_shape_of(array)}")
        fill = array.reshape(())
    return [np.full(dims, fill, dtype=fill.dtype)]


def _range(op: Op, inputs: Inputs, compute: np.dtype | None) -> list[np.ndarray]:
    ends = [required_input(op, inputs, i, n) for i, n in enumerate(("start", "limit", "delta"))]
    for name, array in zip(("start", "limit", "delta"), ends, strict=True):
        if array.size != 1:
            raise fail(op, f"{name} must be a scalar, got shape {_shape_of(array)}")
    dtype = ends[0].dtype
    if any(a.dtype != dtype for a in ends):
        raise fail(op, f"start, limit and delta differ in type: {[str(a.dtype) for a in ends]}")
    if dtype.kind in "iu":
        start, limit, delta = (int(a.reshape(())) for a in ends)
        if delta == 0:
            raise fail(op, "delta is 0")
        count = max(-(-(limit - start) // delta), 0)
        values = start + np.arange(count, dtype=np.int64) * delta
        return [values.astype(dtype)]
    work = compute or np.dtype(np.float64)
    start_f, limit_f, delta_f = (a.reshape(()).astype(work) for a in ends)
    if delta_f == 0:
        raise fail(op, "delta is 0")
    count_f = np.ceil(np.float64(limit_f - start_f) / np.float64(delta_f))
    if not np.isfinite(count_f):
        raise fail(op, f"range({start_f}, {limit_f}, {delta_f}) has no finite length")
    count = max(int(count_f), 0)
    values = start_f + np.arange(count, dtype=work) * delta_f
    return [values.astype(dtype)]


@kernel("Range", versions=(11,))
def range_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Range-11: ``start + i * delta`` for i < max(ceil((limit - start) / delta), 0);
    integers exactly, floats computed in float64 and rounded once to T."""
    return _range(op, inputs, None)


@kernel("Range", versions=(27,))
def range_27(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Range-27: float16 and bfloat16 computed in ``stash_type`` (1 float, the default, or 11
    double) and cast back."""
    start = required_input(op, inputs, 0, "start")
    if start.dtype.name not in LOW_FLOATS:
        return _range(op, inputs, None)
    stash = _attr_int(op, "stash_type", 1)
    computes: dict[int, np.dtype] = {1: np.dtype(np.float32), 11: np.dtype(np.float64)}
    if stash not in computes:
        raise fail(op, f"stash_type {stash} is neither 1 (float) nor 11 (double)")
    return _range(op, inputs, computes[stash])


@kernel("Expand", versions=(8, 13))
def expand_8(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Expand: the input broadcast (both ways, numpy's rule) with ``shape``."""
    data = required_input(op, inputs, 0, "input")
    shape = _int_list(op, required_input(op, inputs, 1, "shape"), "shape")
    if any(d < 0 for d in shape):
        raise fail(op, f"shape {shape} has a negative dim")
    try:
        out = np.broadcast_shapes(data.shape, tuple(shape))
    except ValueError:
        raise fail(op, f"input {_shape_of(data)} does not broadcast with shape {shape}") from None
    return [_own(np.broadcast_to(data, out))]


def _whole(op: Op, array: np.ndarray, name: str) -> int:
    """A one-element tensor holding a whole number, integer or float (Tile-1's type T)."""
    if array.size != 1:
        raise fail(op, f"{name} must hold one value, got shape {_shape_of(array)}")
    value = array.reshape(())[()]
    if array.dtype.kind == "f" and not float(value).is_integer():
        raise fail(op, f"{name} is {float(value)}, not a whole number")
    if array.dtype.kind not in "fiu":
        raise fail(op, f"{name} must be a number, got {array.dtype}")
    return int(value)


@kernel("Tile", versions=(1,))
def tile_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Tile-1: ``tiles`` copies of the input along ``axis``, both one-element inputs of the
    input's float type T (whole numbers)."""
    data = required_input(op, inputs, 0, "input")
    tiles = _whole(op, required_input(op, inputs, 1, "tiles"), "tiles")
    axis = _axis(op, _whole(op, required_input(op, inputs, 2, "axis"), "axis"), data.ndim)
    if tiles < 0:
        raise fail(op, f"tiles is {tiles}")
    reps = [1] * data.ndim
    reps[axis] = tiles
    return [np.tile(data, reps)]


@kernel("Tile", versions=(6, 13))
def tile_6(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Tile-6/13: dim i repeated ``repeats[i]`` times."""
    data = required_input(op, inputs, 0, "input")
    repeats = _int_list(op, required_input(op, inputs, 1, "repeats"), "repeats")
    if len(repeats) != data.ndim:
        raise fail(op, f"repeats {repeats} has {len(repeats)} entries for rank {data.ndim}")
    if any(r < 0 for r in repeats):
        raise fail(op, f"repeats {repeats} has a negative entry")
    return [np.tile(data, repeats)]


# ---------------------------------------------------------------------------------------------
# NonZero, TopK, ArgMax, ArgMin, CumSum, Trilu


@kernel("NonZero", versions=(9, 13))
def nonzero_9(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """NonZero: the indices of the non-zero entries, int64 of shape [rank, count], in
    row-major order. A scalar is read as a one-element 1-D tensor (shape [1, count]), as
    onnxruntime does; numpy refuses 0-D nonzero."""
    x = required_input(op, inputs, 0, "X")
    if x.ndim == 0:
        x = x.reshape(1)
    mask = x != "" if x.dtype.kind in "OUS" else x.astype(bool)
    return [np.array(np.nonzero(mask), dtype=np.int64).reshape(x.ndim, -1)]


def _topk(op: Op, x: np.ndarray, k: int, axis_attr: int, largest: bool) -> list[np.ndarray]:
    """Every TopK version takes a negative axis (the default is -1)."""
    if x.ndim == 0:
        raise fail(op, "cannot take the top k of a scalar")
    axis = _axis(op, axis_attr, x.ndim)
    dim = x.shape[axis]
    if not 0 <= k <= dim:
        raise fail(op, f"k is {k}, outside [0, {dim}] (dim {axis} of input {_shape_of(x)})")
    if largest:
        # Stable ascending sort of the reversed axis, read backwards: descending values,
        # equal values in ascending original index (ONNX: the lower index comes first).
        flipped = np.flip(x, axis=axis)
        order = np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis=axis)
        order = dim - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    top = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return [np.take_along_axis(x, top, axis=axis), top]


@kernel("TopK", versions=(1,))
def topk_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """TopK-1: the ``k`` attribute; the largest values, sorted, ties by lower index."""
    x = required_input(op, inputs, 0, "X")
    k = op.attr("k")
    if not isinstance(k, int):
        raise fail(op, f"attribute k must be an int, got {k!r}")
    return _topk(op, x, k, _attr_int(op, "axis", -1), largest=True)


@kernel("TopK", versions=(10,))
def topk_10(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """TopK-10: ``K`` is a one-element int64 input."""
    x = required_input(op, inputs, 0, "X")
    k = _scalar_int(op, required_input(op, inputs, 1, "K"), "K")
    return _topk(op, x, k, _attr_int(op, "axis", -1), largest=True)


@kernel("TopK", versions=(11, 24))
def topk_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """TopK-11+: ``largest`` (default 1) picks the k largest or smallest; ``sorted=0`` leaves
    the order open, so sorted output is returned either way."""
    x = required_input(op, inputs, 0, "X")
    k = _scalar_int(op, required_input(op, inputs, 1, "K"), "K")
    largest = bool(_attr_int(op, "largest", 1))
    return _topk(op, x, k, _attr_int(op, "axis", -1), largest=largest)


def _arg(op: Op, inputs: Inputs, *, smallest: bool, negative: bool, last: bool) -> np.ndarray:
    data = required_input(op, inputs, 0, "data")
    if data.ndim == 0:
        raise fail(op, "needs an input of rank >= 1")
    axis = _axis(op, _attr_int(op, "axis", 0), data.ndim, negative=negative)
    if data.shape[axis] == 0:
        raise fail(op, f"dim {axis} of input {_shape_of(data)} is empty")
    find = np.argmin if smallest else np.argmax
    if last:
        result = data.shape[axis] - 1 - find(np.flip(data, axis=axis), axis=axis)
    else:
        result = find(data, axis=axis)
    result = np.asarray(result, dtype=np.int64)
    if _attr_int(op, "keepdims", 1):
        result = np.expand_dims(result, axis)
    return result


@kernel("ArgMax", versions=(1,))
def argmax_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMax-1: index (int64) of the first maximum along ``axis`` (>= 0, default 0),
    ``keepdims`` default 1."""
    return [_arg(op, inputs, smallest=False, negative=False, last=False)]


@kernel("ArgMax", versions=(11,))
def argmax_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMax-11: as ArgMax-1, and a negative axis counts from the back."""
    return [_arg(op, inputs, smallest=False, negative=True, last=False)]


@kernel("ArgMax", versions=(12, 13))
def argmax_12(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMax-12/13: ``select_last_index=1`` picks the last maximum."""
    last = bool(_attr_int(op, "select_last_index", 0))
    return [_arg(op, inputs, smallest=False, negative=True, last=last)]


@kernel("ArgMin", versions=(1,))
def argmin_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMin-1: index (int64) of the first minimum along ``axis`` (>= 0, default 0),
    ``keepdims`` default 1."""
    return [_arg(op, inputs, smallest=True, negative=False, last=False)]


@kernel("ArgMin", versions=(11,))
def argmin_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMin-11: as ArgMin-1, and a negative axis counts from the back."""
    return [_arg(op, inputs, smallest=True, negative=True, last=False)]


@kernel("ArgMin", versions=(12, 13))
def argmin_12(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """ArgMin-12/13: ``select_last_index=1`` picks the last minimum."""
    last = bool(_attr_int(op, "select_last_index", 0))
    return [_arg(op, inputs, smallest=True, negative=True, last=last)]


@kernel("CumSum", versions=(11, 14))
def cumsum_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """CumSum: running sums along the scalar input ``axis``; ``exclusive`` leaves out the
    current entry, ``reverse`` runs from the end. float16/bfloat16 accumulate in float32."""
    x = required_input(op, inputs, 0, "x")
    if x.ndim == 0:
        raise fail(op, "needs an input of rank >= 1")
    axis = _axis(op, _scalar_int(op, required_input(op, inputs, 1, "axis"), "axis"), x.ndim)
    exclusive = bool(_attr_int(op, "exclusive", 0))
    reverse = bool(_attr_int(op, "reverse", 0))
    work = x.astype(np.float32) if x.dtype.name in LOW_FLOATS else x
    if reverse:
        work = np.flip(work, axis=axis)
    sums = np.cumsum(work, axis=axis, dtype=work.dtype)
    if exclusive:  # shift by one along the axis, 0 first
        shifted = np.zeros_like(sums)
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[axis], src[axis] = slice(1, None), slice(0, -1)
        shifted[tuple(dst)] = sums[tuple(src)]
        sums = shifted
    if reverse:
        sums = np.flip(sums, axis=axis)
    return [_own(sums.astype(x.dtype))]


@kernel("Trilu", versions=(14,))
def trilu_14(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Trilu: the upper (``upper=1``, default) or lower triangle of the last two dims, from
    diagonal ``k`` (optional scalar input, default 0); the rest is zero."""
    x = required_input(op, inputs, 0, "input")
    if x.ndim < 2:
        raise fail(op, f"needs an input of rank >= 2, got {_shape_of(x)}")
    given = _optional(inputs, 1)
    k = 0 if given is None else _scalar_int(op, given, "k")
    rows, cols = x.shape[-2:]
    keep = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    mask = keep >= k if _attr_int(op, "upper", 1) else keep <= k
    return [np.where(mask, x, np.zeros((), dtype=x.dtype)).astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# Pad


def _pad(
    op: Op,
    data: np.ndarray,
    *,
    pads: Sequence[int],
    mode: object,
    value: object,
    axes: Sequence[int] | None,
    modes: Sequence[str],
) -> np.ndarray:
    """``pads`` = [begin per axis..., end per axis...]; negative entries remove entries (the
    input is cropped first, then padded)."""
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in modes:
        raise fail(op, f"mode {mode!r} is none of {', '.join(modes)}")
    rank = data.ndim
    axes = list(range(rank)) if axes is None else _axes(op, axes, rank)
    if len(pads) != 2 * len(axes):
        raise fail(op, f"pads {list(pads)} has {len(pads)} entries for {len(axes)} axes")
    widths = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        widths[axis] = (pads[i], pads[len(axes) + i])
    crop = []
    for axis, (before, after) in enumerate(widths):
        dim = data.shape[axis]
        low, high = max(-before, 0), dim - max(-after, 0)
        if high < low:
            raise fail(
                op, f"pads {list(pads)} remove more than dim {axis} of input {_shape_of(data)}"
            )
        crop.append(slice(low, high))
    cropped = data[tuple(crop)]
    width = [(max(b, 0), max(a, 0)) for b, a in widths]
    if mode == "constant":
        fill: Any = _zero_of(data.dtype) if value is None else value
        return np.pad(cropped, width, mode="constant", constant_values=fill).astype(
            data.dtype, copy=False
        )
    for axis, (before, after) in enumerate(width):
        left = cropped.shape[axis]
        if (before or after) and left == 0:
            raise fail(op, f"mode {mode} cannot pad dim {axis}, which is empty")
        if mode == "reflect" and max(before, after) > left - 1:
            # numpy would reflect again and again; onnxruntime refuses, and so do we.
            raise fail(
                op,
                f"mode reflect cannot pad dim {axis} by {max(before, after)}: it is {left} "
                f"long, so at most {left - 1} (input {_shape_of(data)}, pads {list(pads)})",
            )
    numpy_mode: Any = mode
    return np.pad(cropped, width, mode=numpy_mode).astype(data.dtype, copy=False)


def _pad_attributes(op: Op, inputs: Inputs, pads_name: str) -> list[np.ndarray]:
    data = required_input(op, inputs, 0, "data")
    pads = _attr_ints(op, pads_name)
    if pads is None:
        raise fail(op, f"attribute {pads_name} is required")
    value = np.asarray(op.attr("value", 0.0)).astype(data.dtype)
    mode = op.attr("mode", "constant")
    modes = ("constant", "reflect", "edge")
    return [_pad(op, data, pads=pads, mode=mode, value=value, axes=None, modes=modes)]


@kernel("Pad", versions=(1,))
def pad_1(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Pad-1: the ``paddings`` attribute ([x1_begin, x2_begin, ..., x1_end, ...]); modes
    constant (with ``value``, default 0), reflect, edge."""
    return _pad_attributes(op, inputs, "paddings")


@kernel("Pad", versions=(2,))
def pad_2(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Pad-2: the attribute is named ``pads``."""
    return _pad_attributes(op, inputs, "pads")


def _pad_inputs(
    op: Op, inputs: Inputs, modes: Sequence[str], axes_index: int | None
) -> np.ndarray:
    data = required_input(op, inputs, 0, "data")
    pads = _int_list(op, required_input(op, inputs, 1, "pads"), "pads")
    given = _optional(inputs, 2)
    value = None
    if given is not None:
        if given.size != 1:
            raise fail(op, f"constant_value must be a scalar, got shape {_shape_of(given)}")
        value = given.reshape(())
    axes_in = None if axes_index is None else _optional(inputs, axes_index)
    axes = None if axes_in is None else _int_list(op, axes_in, "axes")
    mode = op.attr("mode", "constant")
    return _pad(op, data, pads=pads, mode=mode, value=value, axes=axes, modes=modes)


@kernel("Pad", versions=(11, 13))
def pad_11(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Pad-11/13: ``pads`` and optional ``constant_value`` (default 0, "" or False) inputs;
    modes constant, reflect, edge."""
    return [_pad_inputs(op, inputs, ("constant", "reflect", "edge"), None)]


@kernel("Pad", versions=(18,))
def pad_18(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Pad-18: optional ``axes`` input; ``pads`` then has 2 entries per listed axis."""
    return [_pad_inputs(op, inputs, ("constant", "reflect", "edge"), 3)]


@kernel("Pad", versions=(19, 21, 23, 24, 25))
def pad_19(op: Op, inputs: Inputs) -> list[np.ndarray]:
    """Pad-19+: mode ``wrap`` too."""
    return [_pad_inputs(op, inputs, ("constant", "reflect", "edge", "wrap"), 3)]
