"""The tensor-op kernels (kernels/tensor.py) in every schema version.

Unit tests on small models from ONNX text with literal expected values, and a table of single-op
models run by onnxruntime as the independent oracle, one row per op version it implements
(older versions it lacks are covered by the unit tests).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxforge import opset
from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Model
from onnxforge.kernels import KERNELS
from onnxforge.kernels import run as run_op
from onnxforge.testing import model_from_text

TENSOR_OPS = [
    "Split", "Shape", "Size", "Gather", "GatherElements", "Concat", "Slice", "Squeeze",
    "Unsqueeze", "Reshape", "Flatten", "Transpose", "Identity", "ConstantOfShape", "Range",
    "Expand", "Tile", "ScatterND", "NonZero", "TopK", "ArgMax", "ArgMin", "CumSum", "Pad",
    "Trilu",
]  # fmt: skip


def run_model(model: Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The single op of ``model`` through our kernels, inputs by graph-input name."""
    (op,) = model.graph.topo_order()
    args = [None if v is None else feeds[v.name] for v in model.graph.inputs_of(op)]
    return run_op(op, args, dict(model.opset_imports))


def run(version: int, signature: str, body: str, **feeds: np.ndarray) -> list[np.ndarray]:
    """``g (<signature>) => (...) { <body> }`` at opset ``version``; outputs are y, y0, y1."""
    outs = body.split("=", maxsplit=1)[0].replace(" ", "").split(",")
    decl = ", ".join(f"float[N{i}] {o}" for i, o in enumerate(outs))
    text = (
        f'<ir_version: 10, opset_import: ["" : {version}]> '
        f"g ({signature}) => ({decl}) {{ {body} }}"
    )
    return run_model(model_from_text(text), feeds)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("op_type", TENSOR_OPS)
def test_every_version_of_the_op_has_a_kernel(op_type: str) -> None:
    assert KERNELS.versions(op_type) == opset.schema_versions(op_type)


# --- Reshape, Flatten, Squeeze, Unsqueeze, Transpose ------------------------------------------


def test_reshape_0_copies_the_input_dim_and_minus_1_takes_the_rest() -> None:
    (y,) = run(14, "float[2, 3, 4] x, int64[3] s", "y = Reshape (x, s)", x=X234, s=i64(0, -1, 2))
    assert y.shape == (2, 6, 2)
    assert y.reshape(-1).tolist() == list(range(24))


def test_reshape_allowzero_keeps_a_zero_as_an_empty_dim() -> None:
    x = np.zeros((0, 3), dtype=np.float32)
    sig, body = "float[0, 3] x, int64[2] s", "y = Reshape <allowzero = 1> (x, s)"
    (y,) = run(14, sig, body, x=x, s=i64(3, 0))
    assert y.shape == (3, 0)
    (y,) = run(14, sig.replace("<allowzero = 1> ", ""), body.replace("<allowzero = 1> ", ""),
               x=x, s=i64(0, 3))  # fmt: skip
    assert y.shape == (0, 3)


def test_reshape_allowzero_with_zero_and_minus_1_is_an_error() -> None:
    body = "y = Reshape <allowzero = 1> (x, s)"
    with pytest.raises(KernelError, match=r"both 0 and -1"):
        run(14, "float[0, 3] x, int64[2] s", body, x=np.zeros((0, 3), "f4"), s=i64(0, -1))


def test_reshape_without_allowzero_copies_a_zero_even_from_an_empty_input() -> None:
    (y,) = run(13, "float[2, 0] x, int64[3] s", "y = Reshape (x, s)",
               x=np.zeros((2, 0), "f4"), s=i64(0, 0, 5))  # fmt: skip
    assert y.shape == (2, 0, 5)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((-1, -1), "more than one -1"),
        ((5, -1), "does not fit"),
        ((4, 7), r"\[4, 7\] \(\[4, 7\], 28 elements\) does not fit input \[2, 3, 4\] \(24"),
        ((0, 0, 0, 0), "copies dim 3, but the input"),
        ((-2, 12), "below -1"),
    ],
)
def test_reshape_errors_give_the_numbers(shape: tuple[int, ...], message: str) -> None:
    with pytest.raises(KernelError, match=message):
        run(14, "float[2, 3, 4] x, int64[2] s", "y = Reshape (x, s)", x=X234, s=i64(*shape))


def test_reshape_1_takes_the_shape_attribute() -> None:
    (y,) = run(1, "float[2, 3, 4] x", "y = Reshape <shape = [4, 0, -1]> (x)", x=X234)
    assert y.shape == (4, 3, 2)


@pytest.mark.parametrize(
    ("version", "axis", "shape"),
    [(1, 0, (1, 24)), (9, 2, (6, 4)), (11, -1, (6, 4)), (13, 3, (24, 1)), (21, -3, (1, 24))],
)
def test_flatten_splits_the_dims_at_axis(version: int, axis: int, shape: tuple) -> None:
    (y,) = run(version, "float[2, 3, 4] x", f"y = Flatten <axis = {axis}> (x)", x=X234)
    assert y.shape == shape


def test_flatten_before_11_rejects_a_negative_axis() -> None:
    with pytest.raises(KernelError, match=r"axis -1 is outside \[0, 3\]"):
        run(9, "float[2, 3, 4] x", "y = Flatten <axis = -1> (x)", x=X234)


def test_squeeze_without_axes_drops_every_size_1_dim() -> None:
    (y,) = run(13, "float[1, 3, 1] x", "y = Squeeze (x)", x=np.ones((1, 3, 1), "f4"))
    assert y.shape == (3,)
    # An empty axes input reads as none given (onnxruntime agrees).
    (y,) = run(13, "float[1, 3, 1] x, int64[0] a", "y = Squeeze (x, a)",
               x=np.ones((1, 3, 1), "f4"), a=np.zeros(0, np.int64))  # fmt: skip
    assert y.shape == (3,)


def test_squeeze_of_a_dim_that_is_not_1_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"dim 1 of input \[1, 3, 1\] is 3, not 1"):
        run(13, "float[1, 3, 1] x, int64[1] a", "y = Squeeze (x, a)",
            x=np.ones((1, 3, 1), "f4"), a=i64(1))  # fmt: skip


def test_squeeze_1_rejects_negative_axes_squeeze_11_takes_them() -> None:
    x = np.ones((1, 3, 1), "f4")
    with pytest.raises(KernelError, match="negative"):
        run(1, "float[1, 3, 1] x", "y = Squeeze <axes = [-1]> (x)", x=x)
    (y,) = run(11, "float[1, 3, 1] x", "y = Squeeze <axes = [-1]> (x)", x=x)
    assert y.shape == (1, 3)


def test_unsqueeze_inserts_dims_at_output_positions_in_any_order() -> None:
    (y,) = run(13, "float[2, 3, 4] x, int64[2] a", "y = Unsqueeze (x, a)", x=X234, a=i64(4, 0))
    assert y.shape == (1, 2, 3, 4, 1)
    (y,) = run(11, "float[2, 3, 4] x", "y = Unsqueeze <axes = [-1, 1]> (x)", x=X234)
    assert y.shape == (2, 1, 3, 4, 1)


def test_unsqueeze_with_a_repeated_axis_is_an_error() -> None:
    with pytest.raises(KernelError, match="repeat"):
        run(13, "float[2, 3, 4] x, int64[2] a", "y = Unsqueeze (x, a)", x=X234, a=i64(0, -5))


def test_transpose_defaults_to_reversing_the_dims() -> None:
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    (y,) = run(13, "int64[2, 3] x", "y = Transpose (x)", x=x)
    assert y.tolist() == [[0, 3], [1, 4], [2, 5]]
    with pytest.raises(KernelError, match="not a permutation"):
        run(13, "int64[2, 3] x", "y = Transpose <perm = [0, 0]> (x)", x=x)


# --- Shape, Size, Identity ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attrs", "dims"),
    [("", [2, 3, 4]), ("start = -1", [4]), ("end = -1", [2, 3]), ("start = 1, end = 2", [3]),
     ("start = -10, end = 10", [2, 3, 4]), ("start = 2, end = 1", [])],
)  # fmt: skip
def test_shape_15_slices_the_shape_with_clamped_start_and_end(attrs: str, dims: list) -> None:
    body = f"y = Shape <{attrs}> (x)" if attrs else "y = Shape (x)"
    (y,) = run(15, "float[2, 3, 4] x", body, x=X234)
    assert y.dtype == np.int64
    assert y.tolist() == dims


def test_size_is_an_int64_scalar() -> None:
    (y,) = run(13, "float[2, 3, 4] x", "y = Size (x)", x=X234)
    assert y.dtype == np.int64 and y.shape == () and int(y) == 24


def test_identity_copies_and_refuses_non_tensors() -> None:
    model = model_from_text(
        '<ir_version: 10, opset_import: ["" : 16]> g (float[2] x) => (float[2] y) '
        "{ y = Identity (x) }"
    )
    x = np.array([1.5, 2.5], dtype=np.float32)
    (y,) = run_model(model, {"x": x})
    assert y.tolist() == [1.5, 2.5] and not np.shares_memory(x, y)
    with pytest.raises(KernelError, match="not a tensor"):
        run_model(model, {"x": [x, x]})  # type: ignore[dict-item]


# --- Gather, GatherElements, ScatterND ----------------------------------------------------------


def test_gather_takes_negative_indices_from_the_back() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    (y,) = run(13, "int64[2, 3] x, int64[2, 2] i", "y = Gather <axis = 1> (x, i)",
               x=x, i=np.array([[-1, 0], [1, -3]]))  # fmt: skip
    assert y.tolist() == [[[3, 1], [2, 1]], [[6, 4], [5, 4]]]


def test_gather_index_out_of_range_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"holds 3, outside \[-3, 2\]"):
        run(13, "float[2, 3] x, int64[1] i", "y = Gather <axis = 1> (x, i)",
            x=np.zeros((2, 3), "f4"), i=i64(3))  # fmt: skip


def test_gather_elements_with_indices_shorter_than_the_data() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.float32)
    (y,) = run(13, "float[3, 3] x, int64[2, 2] i", "y = GatherElements <axis = 0> (x, i)",
               x=x, i=np.array([[2, -3], [1, 2]]))  # fmt: skip
    assert y.tolist() == [[7, 2], [4, 8]]


SCATTER = "float[4] x, int64[3, 1] i, float[3] u"


@pytest.mark.parametrize(
    ("version", "reduction", "want"),
    [
        (11, None, [1, 20, 30, 4]),
        (16, "add", [1, 2 + 10 + 20, 3 + 30, 4]),
        (16, "mul", [1, 2 * 10 * 20, 3 * 30, 4]),
        (18, "max", [1, 20, 30, 4]),
        (18, "min", [1, 2, 3, 4]),
    ],
)
def test_scatter_nd_applies_updates_in_index_order(
    version: int, reduction: str | None, want: list[float]
) -> None:
    attr = f' <reduction = "{reduction}">' if reduction else ""
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    u = np.array([10, 20, 30], dtype=np.float32)
    (y,) = run(version, SCATTER, f"y = ScatterND{attr} (x, i, u)", x=x,
               i=np.array([[1], [-3], [2]]), u=u)  # fmt: skip
    assert y.tolist() == want
    assert x.tolist() == [1, 2, 3, 4]  # the input is left alone


def test_scatter_nd_16_has_no_max_reduction() -> None:
    with pytest.raises(KernelError, match="reduction 'max' is none of none, add, mul"):
        run(16, SCATTER, 'y = ScatterND <reduction = "max"> (x, i, u)', x=np.zeros(4, "f4"),
            i=np.zeros((3, 1), np.int64), u=np.zeros(3, "f4"))  # fmt: skip


def test_scatter_nd_writes_slices_for_short_index_tuples() -> None:
    x = np.zeros((2, 3), dtype=np.int32)
    (y,) = run(13, "int32[2, 3] x, int64[1, 1] i, int32[1, 3] u", "y = ScatterND (x, i, u)",
               x=x, i=np.array([[1]]), u=np.array([[7, 8, 9]], dtype=np.int32))  # fmt: skip
    assert y.tolist() == [[0, 0, 0], [7, 8, 9]] and y.dtype == np.int32


# --- Concat, Slice ----------------------------------------------------------------------------


def test_concat_1_defaults_to_axis_1_and_concat_4_requires_it() -> None:
    a, b = np.zeros((2, 1), "f4"), np.ones((2, 2), "f4")
    (y,) = run(1, "float[2, 1] a, float[2, 2] b", "y = Concat (a, b)", a=a, b=b)
    assert y.tolist() == [[0, 1, 1], [0, 1, 1]]
    model = model_from_text(
        '<ir_version: 10, opset_import: ["" : 4]> g (float[2, 1] a, float[2, 2] b) => '
        "(float[2, 3] y) { y = Concat <axis = 1> (a, b) }"
    )
    del model.graph.topo_order()[0].attrs["axis"]  # the checker would refuse the text
    with pytest.raises(KernelError, match="axis must be an int, got None"):
        run_model(model, {"a": a, "b": b})


def test_concat_of_mismatched_shapes_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"\[2, 1\], \[3, 2\] differ outside axis 1"):
        run(13, "float[2, 1] a, float[3, 2] b", "y = Concat <axis = -1> (a, b)",
            a=np.zeros((2, 1), "f4"), b=np.zeros((3, 2), "f4"))  # fmt: skip


SLICE = "float[10] x, int64[1] s, int64[1] e, int64[1] a, int64[1] t"


@pytest.mark.parametrize(
    ("start", "end", "step", "want"),
    [
        (2, 5, 1, [2, 3, 4]),
        (-3, 100, 1, [7, 8, 9]),
        (-100, 2, 1, [0, 1]),
        (8, 2, -2, [8, 6, 4]),
        (100, -100, -3, [9, 6, 3, 0]),
        (-1, -11, -1, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]),
        (9223372036854775807, -9223372036854775808, -4, [9, 5, 1]),
        (5, 5, 1, []),
        (3, 7, -1, []),
    ],
)
def test_slice_clamps_like_onnx(start: int, end: int, step: int, want: list[int]) -> None:
    (y,) = run(13, SLICE, "y = Slice (x, s, e, a, t)", x=np.arange(10, dtype=np.float32),
               s=i64(start), e=i64(end), a=i64(0), t=i64(step))  # fmt: skip
    assert y.tolist() == want


def test_slice_1_takes_attributes_and_a_step_of_0_is_an_error() -> None:
    attrs = "starts = [1, -2], ends = [9, 4], axes = [2, 0]"
    (y,) = run(1, "float[2, 3, 4] x", f"y = Slice <{attrs}> (x)", x=X234)
    assert y.shape == (2, 3, 3)
    with pytest.raises(KernelError, match="step 0"):
        run(13, SLICE, "y = Slice (x, s, e, a, t)", x=np.arange(10, dtype=np.float32),
            s=i64(0), e=i64(3), a=i64(0), t=i64(0))  # fmt: skip


def test_slice_10_rejects_negative_axes_slice_11_takes_them() -> None:
    feeds = {"x": np.arange(10, dtype=np.float32), "s": i64(1), "e": i64(3), "a": i64(-1)}
    with pytest.raises(KernelError, match="negative"):
        run(10, SLICE, "y = Slice (x, s, e, a)", **feeds)
    (y,) = run(11, SLICE, "y = Slice (x, s, e, a)", **feeds)
    assert y.tolist() == [1, 2]


# --- ConstantOfShape, Range, Expand, Tile ---------------------------------------------------


def test_constant_of_shape_defaults_to_float32_zeros_and_keeps_the_value_type() -> None:
    (y,) = run(9, "int64[2] s", "y = ConstantOfShape (s)", s=i64(2, 3))
    assert y.dtype == np.float32 and y.tolist() == [[0, 0, 0]] * 2
    (y,) = run(20, "int64[0] s", "y = ConstantOfShape <value = int64[1] {7}> (s)",
               s=np.zeros(0, np.int64))  # fmt: skip
    assert y.dtype == np.int64 and y.shape == () and int(y) == 7


@pytest.mark.parametrize(
    ("dtype", "start", "limit", "delta", "want"),
    [
        ("int32", 1, 10, 3, [1, 4, 7]),
        ("int64", 10, 4, -2, [10, 8, 6]),
        ("int64", 4, 10, -2, []),
        ("float", 0.5, 2.0, 0.5, [0.5, 1.0, 1.5]),
        ("double", 1.0, 0.0, -0.25, [1.0, 0.75, 0.5, 0.25]),
    ],
)
def test_range_gives_start_plus_i_delta(
    dtype: str, start: float, limit: float, delta: float, want: list
) -> None:
    np_dtype = {"int32": np.int32, "int64": np.int64, "float": np.float32, "double": np.float64}
    feeds = {
        k: np.array(v, dtype=np_dtype[dtype])
        for k, v in zip("ald", (start, limit, delta), strict=True)
    }
    (y,) = run(11, f"{dtype} a, {dtype} l, {dtype} d", "y = Range (a, l, d)", **feeds)
    assert y.dtype == np_dtype[dtype] and y.tolist() == want


def test_range_27_float16_counts_past_2048_in_float32() -> None:
    # float16 steps of 1 stop at 2048 (2048 + 1 rounds back); stash_type 1 computes in float32.
    feeds = {
        k: np.array(v, dtype=np.float16) for k, v in zip("ald", (2040.0, 2056.0, 1.0), strict=True)
    }
    (y,) = run(27, "float16 a, float16 l, float16 d", "y = Range (a, l, d)", **feeds)
    assert y.dtype == np.float16
    # 2040 + i in float32, rounded to float16 (spacing 2 from 2048, ties to even); adding 1
    # in float16 would stay at 2048 from index 8 on.
    assert y.tolist() == [2040, 2041, 2042, 2043, 2044, 2045, 2046, 2047, 2048, 2048, 2050,
                          2052, 2052, 2052, 2054, 2056]  # fmt: skip


def test_range_with_delta_0_is_an_error() -> None:
    with pytest.raises(KernelError, match="delta is 0"):
        run(11, "int64 a, int64 l, int64 d", "y = Range (a, l, d)",
            a=np.array(0), l=np.array(3), d=np.array(0))  # fmt: skip


def test_expand_broadcasts_both_ways() -> None:
    x = np.array([[1], [2], [3]], dtype=np.int64)
    (y,) = run(13, "int64[3, 1] x, int64[3] s", "y = Expand (x, s)", x=x, s=i64(2, 1, 2))
    assert y.shape == (2, 3, 2)
    assert y[1].tolist() == [[1, 1], [2, 2], [3, 3]]
    with pytest.raises(KernelError, match=r"\[3, 1\] does not broadcast with shape \[2, 1\]"):
        run(13, "int64[3, 1] x, int64[2] s", "y = Expand (x, s)", x=x, s=i64(2, 1))


def test_tile_1_repeats_along_one_axis_tile_6_along_each() -> None:
    x = np.array([[1, 2]], dtype=np.float32)
    # Tile-1's tiles and axis are of the input's float type T.
    (y,) = run(1, "float[1, 2] x, float t, float a", "y = Tile (x, t, a)",
               x=x, t=np.array(3.0, np.float32), a=np.array(0.0, np.float32))  # fmt: skip
    assert y.tolist() == [[1, 2], [1, 2], [1, 2]]
    with pytest.raises(KernelError, match="tiles is 2.5, not a whole number"):
        run(1, "float[1, 2] x, float t, float a", "y = Tile (x, t, a)",
            x=x, t=np.array(2.5, np.float32), a=np.array(0.0, np.float32))  # fmt: skip
    (y,) = run(13, "float[1, 2] x, int64[2] r", "y = Tile (x, r)", x=x, r=i64(2, 2))
    assert y.tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]


# --- NonZero, TopK, ArgMax/ArgMin, CumSum, Trilu ----------------------------------------------


def test_nonzero_lists_indices_in_row_major_order() -> None:
    x = np.array([[0, 2], [3, 0], [4, 5]], dtype=np.int32)
    (y,) = run(13, "int32[3, 2] x", "y = NonZero (x)", x=x)
    assert y.dtype == np.int64 and y.tolist() == [[0, 1, 2, 2], [1, 0, 0, 1]]
    (y,) = run(13, "float x", "y = NonZero (x)", x=np.array(2.0, dtype=np.float32))
    assert y.shape == (1, 1)


TIES = np.array([[3, 1, 3, 2, 1, 3]], dtype=np.float32)


@pytest.mark.parametrize(
    ("largest", "values", "indices"),
    [(1, [3, 3, 3, 2], [0, 2, 5, 3]), (0, [1, 1, 2, 3], [1, 4, 3, 0])],
)
def test_topk_breaks_ties_by_the_lower_index(largest: int, values: list, indices: list) -> None:
    body = f"v, i = TopK <largest = {largest}> (x, k)"
    values_out, indices_out = run(11, "float[1, 6] x, int64[1] k", body, x=TIES, k=i64(4))
    assert values_out.tolist() == [values]
    assert indices_out.dtype == np.int64 and indices_out.tolist() == [indices]


def test_topk_1_takes_k_as_attribute_and_topk_10_as_input() -> None:
    v, i = run(1, "float[1, 6] x", "v, i = TopK <k = 2> (x)", x=TIES)
    assert v.tolist() == [[3, 3]] and i.tolist() == [[0, 2]]
    v, i = run(10, "float[1, 6] x, int64[1] k", "v, i = TopK <axis = 0> (x, k)", x=TIES, k=i64(1))
    assert i.tolist() == [[0, 0, 0, 0, 0, 0]]


def test_topk_with_k_beyond_the_dim_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"k is 7, outside \[0, 6\]"):
        run(11, "float[1, 6] x, int64[1] k", "v, i = TopK (x, k)", x=TIES, k=i64(7))


def test_topk_keeps_unsigned_and_half_types() -> None:
    for dtype in (np.uint64, np.float16, ml_dtypes.bfloat16):
        x = np.array([5, 9, 1, 9], dtype=dtype)
        v, i = run(24, "float[4] x, int64[1] k", "v, i = TopK (x, k)", x=x, k=i64(3))
        assert v.dtype == np.dtype(dtype) and v.astype(np.float64).tolist() == [9, 9, 5]
        assert i.tolist() == [1, 3, 0]


@pytest.mark.parametrize(
    ("op_type", "last", "want"),
    [("ArgMax", 0, [1, 0]), ("ArgMax", 1, [2, 1]), ("ArgMin", 0, [0, 2]), ("ArgMin", 1, [3, 3])],
)
def test_arg_max_and_min_pick_the_first_or_last_index(op_type: str, last: int, want: list) -> None:
    x = np.array([[1, 5, 5, 1], [7, 7, 0, 0]], dtype=np.float32)
    attrs = f"axis = 1, keepdims = 0, select_last_index = {last}"
    (y,) = run(13, "float[2, 4] x", f"y = {op_type} <{attrs}> (x)", x=x)
    assert y.dtype == np.int64 and y.tolist() == want


def test_arg_max_keeps_the_reduced_dim_by_default_and_1_rejects_negative_axes() -> None:
    (y,) = run(11, "float[2, 3, 4] x", "y = ArgMax <axis = -2> (x)", x=X234)
    assert y.shape == (2, 1, 4) and y.reshape(-1).tolist() == [2] * 8
    with pytest.raises(KernelError, match="negative"):
        run(1, "float[2, 3, 4] x", "y = ArgMax <axis = -2> (x)", x=X234)


@pytest.mark.parametrize(
    ("exclusive", "reverse", "want"),
    [(0, 0, [1, 3, 6, 10]), (1, 0, [0, 1, 3, 6]), (0, 1, [10, 9, 7, 4]), (1, 1, [9, 7, 4, 0])],
)
def test_cumsum_exclusive_and_reverse(exclusive: int, reverse: int, want: list) -> None:
    attrs = f"exclusive = {exclusive}, reverse = {reverse}"
    x = np.array([1, 2, 3, 4], dtype=np.int32)
    (y,) = run(14, "int32[4] x, int32 a", f"y = CumSum <{attrs}> (x, a)", x=x,
               a=np.array(0, dtype=np.int32))  # fmt: skip
    assert y.dtype == np.int32 and y.tolist() == want


def test_cumsum_float16_accumulates_in_float32() -> None:
    x = np.full(3000, 1.0, dtype=np.float16)
    (y,) = run(14, "float16[3000] x, int64 a", "y = CumSum (x, a)", x=x, a=np.array(0))
    assert y.dtype == np.float16 and float(y[-1]) == 3000.0  # float16 steps would stop at 2048


@pytest.mark.parametrize(
    ("upper", "k", "want"),
    [
        (1, None, [[1, 2, 3], [0, 5, 6], [0, 0, 9]]),
        (1, 1, [[0, 2, 3], [0, 0, 6], [0, 0, 0]]),
        (0, None, [[1, 0, 0], [4, 5, 0], [7, 8, 9]]),
        (0, -1, [[0, 0, 0], [4, 0, 0], [7, 8, 0]]),
    ],
)
def test_trilu_keeps_a_triangle(upper: int, k: int | None, want: list) -> None:
    x = np.arange(1, 10, dtype=np.int64).reshape(3, 3)
    if k is None:
        (y,) = run(14, "int64[3, 3] x", f"y = Trilu <upper = {upper}> (x)", x=x)
    else:
        (y,) = run(14, "int64[3, 3] x, int64 k", f"y = Trilu <upper = {upper}> (x, k)",
                   x=x, k=np.array(k))  # fmt: skip
    assert y.tolist() == want


# --- Pad ------------------------------------------------------------------------------------

P = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)


@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("constant", [[0, 1, 2, 3, 0, 0]] * 1 + [[0, 4, 5, 6, 0, 0]]),
        ("edge", [[1, 1, 2, 3, 3, 3], [4, 4, 5, 6, 6, 6]]),
        ("reflect", [[2, 1, 2, 3, 2, 1], [5, 4, 5, 6, 5, 4]]),
        ("wrap", [[3, 1, 2, 3, 1, 2], [6, 4, 5, 6, 4, 5]]),
    ],
)
def test_pad_modes(mode: str, want: list) -> None:
    (y,) = run(19, "float[2, 3] x, int64[4] p", f'y = Pad <mode = "{mode}"> (x, p)',
               x=P, p=i64(0, 1, 0, 2))  # fmt: skip
    assert y.tolist() == want


def test_pad_negative_pads_remove_entries() -> None:
    (y,) = run(13, "float[2, 3] x, int64[4] p, float c", "y = Pad (x, p, c)",
               x=P, p=i64(-1, 1, 1, -1), c=np.array(9, dtype=np.float32))  # fmt: skip
    assert y.tolist() == [[9, 4, 5], [9, 9, 9]]


def test_pad_18_pads_only_the_listed_axes() -> None:
    (y,) = run(18, "float[2, 3] x, int64[2] p, int64[1] a", 'y = Pad <mode = "edge"> (x, p, , a)',
               x=P, p=i64(1, 0), a=i64(-2))  # fmt: skip
    assert y.tolist() == [[1, 2, 3], [1, 2, 3], [4, 5, 6]]


def test_pad_2_and_pad_1_take_attributes() -> None:
    (y,) = run(2, "float[2, 3] x", "y = Pad <pads = [1, 0, 0, 0], value = 7.0> (x)", x=P)
    assert y.tolist() == [[7, 7, 7], [1, 2, 3], [4, 5, 6]]
    (y,) = run(1, "float[2, 3] x", "y = Pad <paddings = [0, 0, 0, 1], value = 7.0> (x)", x=P)
    assert y.tolist() == [[1, 2, 3, 7], [4, 5, 6, 7]]


def test_pad_18_has_no_wrap_mode_and_reflect_cannot_pad_past_the_edge() -> None:
    with pytest.raises(KernelError, match="mode 'wrap' is none of constant, reflect, edge"):
        run(18, "float[2, 3] x, int64[4] p", 'y = Pad <mode = "wrap"> (x, p)',
            x=P, p=i64(0, 1, 0, 1))  # fmt: skip
    with pytest.raises(KernelError, match="cannot pad dim 1 by 3: it is 3 long, so at most 2"):
        run(19, "float[2, 3] x, int64[4] p", 'y = Pad <mode = "reflect"> (x, p)',
            x=P, p=i64(0, 3, 0, 0))  # fmt: skip


def test_pad_keeps_bool_and_int_types() -> None:
    (y,) = run(13, "bool[1, 2] x, int64[4] p", "y = Pad (x, p)",
               x=np.array([[True, True]]), p=i64(0, 1, 0, 0))  # fmt: skip
    assert y.dtype == np.bool_ and y.tolist() == [[False, True, True]]
    (y,) = run(13, "int8[2] x, int64[2] p, int8 c", "y = Pad (x, p, c)",
               x=np.array([1, 2], np.int8), p=i64(1, 1), c=np.array(-3, np.int8))  # fmt: skip
    assert y.dtype == np.int8 and y.tolist() == [-3, 1, 2, -3]


# --- outputs are fresh arrays of the input's dtype ------------------------------------------

VIEW_OPS = [
    (13, "float[2, 3, 4] x, int64[2] s", "y = Reshape (x, s)", {"s": i64(4, 6)}),
    (13, "float[2, 3, 4] x", "y = Flatten (x)", {}),
    (13, "float[2, 3, 4] x", "y = Transpose (x)", {}),
    (13, "float[2, 3, 4] x, int64[1] a", "y = Unsqueeze (x, a)", {"a": i64(0)}),
    (13, "float[2, 3, 4] x", "y = Identity (x)", {}),
    (13, "float[2, 3, 4] x, int64[1] s, int64[1] e", "y = Slice (x, s, e)",
     {"s": i64(0), "e": i64(1)}),
    (13, "float[2, 3, 4] x, int64[3] s", "y = Expand (x, s)", {"s": i64(1, 1, 1)}),
    (13, "float[2, 3, 4] x, int64[3] r", "y = Tile (x, r)", {"r": i64(1, 1, 1)}),
    (13, "float[2, 3, 4] x, int64[6] p", "y = Pad (x, p)", {"p": i64(0, 0, 0, 0, 0, 0)}),
]  # fmt: skip


@pytest.mark.parametrize(("version", "sig", "body", "feeds"), VIEW_OPS,
                         ids=[b.split()[2] for _, _, b, _ in VIEW_OPS])  # fmt: skip
def test_outputs_never_alias_a_read_only_input(
    version: int, sig: str, body: str, feeds: dict
) -> None:
    x = X234.copy()
    x.flags.writeable = False
    (y,) = run(version, sig, body, x=x, **feeds)
    assert not np.shares_memory(x, y) and y.flags.writeable


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int64, np.uint8, np.bool_])
def test_data_movement_keeps_the_dtype(dtype: type) -> None:
    x: np.ndarray = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    sig = "float[2, 3, 4] x, int64[1] i, int64[6] p"
    for body in ("y = Gather (x, i)", "y = Concat <axis = 0> (x, x)", "y = Pad (x, p)",
                 "y = Transpose (x)"):  # fmt: skip
        (y,) = run(13, sig, body, x=x, i=i64(1), p=i64(1, 0, 0, 0, 0, 0))
        assert y.dtype == np.dtype(dtype), body


# --- onnxruntime as the oracle, every version it implements ---------------------------------

_RNG = np.random.default_rng(20240611)
F = _RNG.standard_normal((2, 3, 4)).astype(np.float32)
M = np.arange(12, dtype=np.float32).reshape(3, 4)
D = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _rows() -> list[tuple[str, int, dict, dict, int]]:
    """(op, opset, inputs by name (None: omitted), attributes, outputs)."""
    rows: list[tuple[str, int, dict, dict, int]] = []
    add = rows.append
    for v in (1, 13, 15, 19, 21):
        add(("Shape", v, {"x": F}, {}, 1))
    for v in (15, 21):
        add(("Shape", v, {"x": F}, {"start": -2, "end": 100}, 1))
    for v in (1, 13, 19, 21):
        add(("Size", v, {"x": F}, {}, 1))
    for v in (1, 11, 13):
        add(("Gather", v, {"x": F, "i": i64(2, 0, -1)}, {"axis": -1}, 1))
        add(("Gather", v, {"x": F, "i": np.array(1, np.int64)}, {"axis": 1}, 1))
    for v in (11, 13):
        add(("GatherElements", v, {"x": F, "i": np.array([[[1, 0, 2, -1]]])}, {"axis": 2}, 1))
    for v in (4, 11, 13):
        add(("Concat", v, {"a": F, "b": F[:, :1]}, {"axis": 1}, 1))
    add(("Concat", 11, {"a": F, "b": F[..., :1].copy()}, {"axis": -1}, 1))
    add(("Slice", 1, {"x": F}, {"starts": [1, -3], "ends": [100, -1], "axes": [1, 2]}, 1))
    for v in (10, 11, 13):
        add(("Slice", v, {"x": F, "s": i64(-1, 100), "e": i64(-100, 0), "a": i64(2, 1),
                          "t": i64(-1, -2)}, {}, 1))  # fmt: skip
        add(("Slice", v, {"x": F, "s": i64(3, -2), "e": i64(-(2**63), -1), "a": i64(2, 1),
                          "t": i64(-2, 1)}, {}, 1))  # fmt: skip
        add(("Slice", v, {"x": F, "s": i64(0), "e": i64(9), "a": None, "t": None}, {}, 1))
    for v in (1, 11):
        add(("Squeeze", v, {"x": F[:1, :, :1].copy()}, {"axes": [0]}, 1))
        add(("Unsqueeze", v, {"x": F}, {"axes": [0, 4]}, 1))
    for v in (13, 21):
        add(("Squeeze", v, {"x": F[:1, :, :1].copy(), "a": i64(-1, 0)}, {}, 1))
        add(("Squeeze", v, {"x": F[:1, :, :1].copy()}, {}, 1))
        add(("Squeeze", v, {"x": F[:1, :, :1].copy(), "a": np.zeros(0, np.int64)}, {}, 1))
        add(("Unsqueeze", v, {"x": F, "a": i64(-1, 0)}, {}, 1))
    for v in (5, 13, 14, 19, 21):
        add(("Reshape", v, {"x": F, "s": i64(0, -1, 2)}, {}, 1))
    add(("Reshape", 14, {"x": np.zeros((0, 3), "f4"), "s": i64(3, 0)}, {"allowzero": 1}, 1))
    for v in (1, 9, 11, 13, 21):
        for axis in (0, 2):
            add(("Flatten", v, {"x": F}, {"axis": axis}, 1))
    add(("Flatten", 11, {"x": F}, {"axis": -1}, 1))
    for v in (1, 13, 21):
        add(("Transpose", v, {"x": F}, {"perm": [1, 2, 0]}, 1))
        add(("Transpose", v, {"x": F}, {}, 1))
    for v in (1, 13, 14, 16, 19, 21):
        add(("Identity", v, {"x": F}, {}, 1))
    seven = numpy_helper.from_array(np.array([7], np.int64))
    for v in (9, 20, 21):
        add(("ConstantOfShape", v, {"s": i64(2, 3)}, {}, 1))
        add(("ConstantOfShape", v, {"s": i64(2, 0)}, {"value": seven}, 1))
    add(("Range", 11, {"a": np.array(1, np.int32), "b": np.array(10, np.int32),
                       "c": np.array(3, np.int32)}, {}, 1))  # fmt: skip
    add(("Range", 11, {"a": np.array(10, np.int64), "b": np.array(4, np.int64),
                       "c": np.array(-2, np.int64)}, {}, 1))  # fmt: skip
    add(("Range", 11, {"a": np.array(1.0), "b": np.array(0.0), "c": np.array(-0.25)}, {}, 1))
    for v in (8, 13):
        add(("Expand", v, {"x": M[:, :1].copy(), "s": i64(2, 1, 4)}, {}, 1))
    for v in (6, 13):
        add(("Tile", v, {"x": F, "r": i64(1, 2, 3)}, {}, 1))
        add(("Tile", v, {"x": F, "r": i64(0, 1, 1)}, {}, 1))
    for v in (11, 13, 16, 18):
        add(("ScatterND", v, {"d": D, "i": np.array([[1, 2], [0, -1]]), "u": F[0, :2]}, {}, 1))
    for v in (16, 18):
        for reduction in ("add", "mul"):
            add(("ScatterND", v, {"d": D, "i": np.array([[1], [1], [0]]), "u": F[:, :3].repeat(
                2, axis=0)[:3]}, {"reduction": reduction}, 1))  # fmt: skip
    for reduction in ("max", "min"):
        same = {"d": D, "i": np.array([[1, 1, 1], [1, 1, 1]]), "u": np.array([100, -5], "f4")}
        add(("ScatterND", 18, same, {"reduction": reduction}, 1))
    for v in (9, 13):
        add(("NonZero", v, {"x": np.array([[1, 0], [0, 3]], np.float32)}, {}, 1))
        add(("NonZero", v, {"x": np.zeros((2, 0), np.int64)}, {}, 1))
    ties = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 0, 0, 0, 0]], np.float32)
    add(("TopK", 1, {"x": ties}, {"k": 3}, 2))
    add(("TopK", 10, {"x": ties, "k": i64(4)}, {}, 2))
    for v in (11, 24):
        for largest in (0, 1):
            add(("TopK", v, {"x": ties, "k": i64(4)}, {"largest": largest}, 2))
            add(("TopK", v, {"x": ties, "k": i64(2)}, {"largest": largest, "axis": 0}, 2))
    a = np.array([[1, 5, 5, 2], [7, 7, 0, 0]], np.float32)
    for op in ("ArgMax", "ArgMin"):
        add((op, 1, {"x": a}, {"axis": 1}, 1))
        add((op, 11, {"x": a}, {"axis": -1, "keepdims": 0}, 1))
        for v in (12, 13):
            for last in (0, 1):
                add((op, v, {"x": a}, {"axis": 1, "select_last_index": last}, 1))
    for v in (11, 14):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                attrs = {"exclusive": exclusive, "reverse": reverse}
                add(("CumSum", v, {"x": np.arange(6, dtype=np.int64), "a": np.array(-1)}, attrs,
                     1))  # fmt: skip
                add(("CumSum", v, {"x": D, "a": np.array(1, np.int32)}, attrs, 1))
    for upper in (0, 1):
        add(("Trilu", 14, {"x": F}, {"upper": upper}, 1))
        for k in (-1, 2, 10):
            add(("Trilu", 14, {"x": F, "k": np.array(k, np.int64)}, {"upper": upper}, 1))
    for mode in ("constant", "reflect", "edge"):
        add(("Pad", 2, {"x": M}, {"pads": [1, 2, 1, 1], "mode": mode}, 1))
        for v in (11, 13, 18, 19, 21):
            add(("Pad", v, {"x": M, "p": i64(1, 2, 1, 1)}, {"mode": mode}, 1))
            add(("Pad", v, {"x": M, "p": i64(-1, 2, 1, -1)}, {"mode": mode}, 1))
    for v in (11, 18, 21):
        add(("Pad", v, {"x": M, "p": i64(1, 0, 0, 3), "c": np.array(5, np.float32)}, {}, 1))
    for v in (18, 19, 21):
        add(("Pad", v, {"x": M, "p": i64(1, 3), "c": None, "a": i64(-1)}, {"mode": "edge"}, 1))
    for v in (19, 21):
        add(("Pad", v, {"x": M, "p": i64(1, 3, 2, 1)}, {"mode": "wrap"}, 1))
        add(("Pad", v, {"x": M, "p": i64(0, 5, 0, 6)}, {"mode": "wrap"}, 1))
    return rows


ROWS = _rows()


def node_proto(
    op_type: str, version: int, inputs: dict, attrs: dict, n_out: int
) -> onnx.ModelProto:
    names, infos = [], []
    for name, value in inputs.items():
        if value is None:
            names.append("")
            continue
        names.append(name)
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        infos.append(helper.make_tensor_value_info(name, elem, value.shape))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, names, outs, name="node", **attrs)
    graph = helper.make_graph([node], "g", infos, [onnx.ValueInfoProto(name=o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    model.ir_version = 3 if version < 7 else 7 if version < 18 else 8 if version < 21 else 10
    return model


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}-{r[1]}-{i}" for i, r in enumerate(ROWS)])
def test_kernel_equals_onnxruntime(ort: object, row: tuple) -> None:
    op_type, version, inputs, attrs, n_out = row
    proto = node_proto(op_type, version, inputs, attrs, n_out)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    options = ort.SessionOptions()  # type: ignore[attr-defined]
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # type: ignore[attr-defined]
    session = ort.InferenceSession(  # type: ignore[attr-defined]
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    want = session.run(None, feeds)
    got = run_model(from_proto(proto), dict(inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype.kind == "f":  # onnxruntime sums in another order (CumSum, ScatterND add)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)
