"""ScatterElements and ScatterND with a reduction written out below its version: 'add'/'mul'
(from 16) and 'max'/'min' (from 18), compared with the original on onnxruntime."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from adapter_check import check_conversion, header, op_types, unknown_rank
from suites import node_cases

from onnxforge.errors import AdapterError
from onnxforge.io import from_proto, to_proto
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime

pytest.importorskip("onnxruntime")

REDUCTIONS = ["add", "mul", "max", "min"]
TYPES = {"float": np.float32, "int64": np.int64}


def _since(reduction: str) -> int:
    return 16 if reduction in ("add", "mul") else 18


def _values(rng: np.random.Generator, shape: tuple[int, ...], elem: str) -> np.ndarray:
    if elem == "int64":
        return rng.integers(-5, 6, shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def _typed(elem: str, shape: tuple[int, ...], name: str) -> str:
    """``float[4, 3] x``; ``float x`` for a scalar."""
    dims = f"[{', '.join(map(str, shape))}]" if shape else ""
    return f"{elem}{dims} {name}"


def _targets(reduction: str, elem: str) -> list[int]:
    """13, and 11 where its ops take the type (Max-8/Min-8 are float only)."""
    if elem == "int64" and reduction in ("max", "min"):
        return [_since(reduction) - 1, 13]
    return [_since(reduction) - 1, 13, 11]


# (data shape, indices shape, axis): duplicates in every case (more indices than the axis' dim
# across the other positions), indices shorter than the data in a non-axis dim in some.
ELEMENTS_CASES = [
    ((4, 3), (5, 3), 0),
    ((4, 5), (2, 7), 1),
    ((2, 3, 4), (2, 2, 6), -1),
    ((3, 4, 2), (2, 5, 2), -2),
]


@pytest.mark.parametrize("elem", list(TYPES))
@pytest.mark.parametrize(("data", "indices", "axis"), ELEMENTS_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_reduction_is_written_out_below_its_version(
    reduction: str, data: tuple, indices: tuple, axis: int, elem: str
) -> None:
    rng = np.random.default_rng(len(data) * 10 + axis)
    depth = data[axis]
    feeds = {
        "x": _values(rng, data, elem),
        "i": rng.integers(-depth, depth, indices).astype(np.int64),  # negative ones too
        "u": _values(rng, indices, elem),
    }
    assert indices[axis] > depth  # duplicates along the axis at every other position
    text = f"""{header(_since(reduction))} g ({_typed(elem, data, "x")},
        {_typed("int64", indices, "i")}, {_typed(elem, indices, "u")})
        => ({_typed(elem, data, "y")}) {{
        y = ScatterElements <axis = {axis}, reduction = "{reduction}"> (x, i, u) }}"""
    for target in _targets(reduction, elem):
        model = check_conversion(text, target, feeds=feeds)
        assert "ScatterElements" not in op_types(model)


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_int64_max_and_min_stop_at_12_where_max_and_min_take_floats_only(reduction: str) -> None:
    text = f"""{header(18)} g (int64[4, 3] x, int64[5, 3] i, int64[5, 3] u) => (int64[4, 3] y) {{
        y = ScatterElements <reduction = "{reduction}"> (x, i, u) }}"""
    op = reduction.capitalize()
    with pytest.raises(AdapterError, match=rf"{op} node .* 12 -> 11: .*element type 7"):
        convert(model_from_text(text), 11)


def test_int32_indices_are_cast() -> None:
    text = f"""{header(16)} g (float[4, 3] x, int32[5, 3] i, float[5, 3] u) => (float[4, 3] y) {{
        y = ScatterElements <reduction = "add"> (x, i, u) }}"""
    rng = np.random.default_rng(1)
    feeds = {
        "x": _values(rng, (4, 3), "float"),
        "i": rng.integers(-4, 4, (5, 3)).astype(np.int32),
        "u": _values(rng, (5, 3), "float"),
    }
    check_conversion(text, 13, feeds=feeds)


def test_indices_as_wide_as_the_data_need_no_pad() -> None:
    """A message-passing sum: edges [E, H] into nodes [N, H], symbolic dims."""
    text = f"""{header(16)} g (float[N, 8] x, int64[E, 8] i, float[E, 8] u) => (float[N, 8] y) {{
        y = ScatterElements <reduction = "add"> (x, i, u) }}"""
    rng = np.random.default_rng(2)
    feeds = {
        "x": np.zeros((5, 8), np.float32),
        "i": np.repeat(rng.integers(0, 5, (9, 1)), 8, axis=1).astype(np.int64),
        "u": _values(rng, (9, 8), "float"),
    }
    model = check_conversion(text, 13, feeds=feeds)
    assert "Pad" not in op_types(model)


def test_indices_of_unknown_extent_are_padded_to_the_data() -> None:
    text = f"""{header(18)} g (float[N, 6] x, int64[E, F] i, float[E, F] u) => (float[N, 6] y) {{
        y = ScatterElements <reduction = "max"> (x, i, u) }}"""
    rng = np.random.default_rng(3)
    feeds = {
        "x": _values(rng, (3, 6), "float"),
        "i": rng.integers(-3, 3, (7, 4)).astype(np.int64),
        "u": _values(rng, (7, 4), "float"),
    }
    model = check_conversion(text, 13, feeds=feeds)
    assert "Pad" in op_types(model)


def test_reduction_none_is_dropped_at_15() -> None:
    text = f"""{header(16)} g (float[4, 3] x, int64[2, 3] i, float[2, 3] u) => (float[4, 3] y) {{
        y = ScatterElements <axis = 0, reduction = "none"> (x, i, u) }}"""
    feeds = {
        "x": np.zeros((4, 3), np.float32),
        "i": np.array([[0, 1, 2], [3, -1, 1]], np.int64),
        "u": np.ones((2, 3), np.float32),
    }
    model = check_conversion(text, 15, feeds=feeds)
    assert op_types(model) == ["ScatterElements"]
    assert model.graph.ops[0].attr("reduction") is None


def test_add_and_mul_stay_scatter_nodes_at_16_and_17() -> None:
    text = f"""{header(18)} g (float[4, 3] x, int64[2, 3] i, float[2, 3] u) => (float[4, 3] y) {{
        y = ScatterElements <reduction = "mul"> (x, i, u) }}"""
    model = model_from_text(text)
    convert(model, 16)
    assert op_types(model) == ["ScatterElements"]


def test_unknown_rank_is_refused_with_the_reason() -> None:
    text = f"""{header(16)} g (float[4, 3] x, int64[2, 3] i, float[2, 3] u) => (float[4, 3] y) {{
        y = ScatterElements <reduction = "add"> (x, i, u) }}"""
    model = unknown_rank(text, "x")
    with pytest.raises(AdapterError, match=r"16 -> 15: reduction='add' and the data's rank"):
        convert(model, 15)


def test_unknown_element_type_is_refused_with_the_reason() -> None:
    text = f"""{header(18)} g (float[4, 3] x, int64[2, 3] i, float[2, 3] u) => (float[4, 3] y) {{
        y = ScatterElements <reduction = "min"> (x, i, u) }}"""
    model = model_from_text(text)
    for value in model.graph.inputs:
        value.type = None
    with pytest.raises(AdapterError, match=r"reduction='min' and the data's element type"):
        convert(model, 17)


# (data shape, indices shape): k = indices' last dim addresses the data's first k dims.
ND_CASES = [
    ((4, 5, 2), (6, 2)),  # slices of the last dim
    ((4, 3), (2, 3, 1)),  # rows, a 2-D batch of index tuples
    ((4, 3), (9, 2)),  # single elements
    ((4, 3), (2,)),  # one index tuple, a scalar update
]


@pytest.mark.parametrize("elem", list(TYPES))
@pytest.mark.parametrize(("data", "indices"), ND_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_reduction_is_written_out_below_its_version(
    reduction: str, data: tuple, indices: tuple, elem: str
) -> None:
    rng = np.random.default_rng(len(indices))
    k = indices[-1]
    bounds = np.array(data[:k])
    index = (rng.random(indices) * bounds).astype(np.int64)
    index[..., 0].flat[0] -= bounds[0]  # a negative index
    updates = tuple(indices[:-1]) + tuple(data[k:])
    feeds = {"x": _values(rng, data, elem), "i": index, "u": _values(rng, updates, elem)}
    text = f"""{header(_since(reduction))} g ({_typed(elem, data, "x")},
        {_typed("int64", indices, "i")}, {_typed(elem, updates, "u")})
        => ({_typed(elem, data, "y")}) {{
        y = ScatterND <reduction = "{reduction}"> (x, i, u) }}"""
    for target in _targets(reduction, elem):
        model = check_conversion(text, target, feeds=feeds)
        assert "ScatterND" not in op_types(model)


def test_scatter_nd_with_unknown_index_length_is_refused_with_the_reason() -> None:
    text = f"""{header(16)} g (float[4, 3] x, int64[2, K] i, float[2, 3] u) => (float[4, 3] y) {{
        y = ScatterND <reduction = "add"> (x, i, u) }}"""
    with pytest.raises(AdapterError, match=r"reduction='add' and the indices' last dim"):
        convert(model_from_text(text), 15)


def _array(data: object) -> np.ndarray:
    if isinstance(data, onnx.TensorProto):
        return onnx.numpy_helper.to_array(data)
    return np.asarray(data)


_SUITE = re.compile(
    r"test_scatter(_elements_with_(duplicate_indices|reduction_\w+)|nd_(add|multiply|max|min)\w*)"
)


@pytest.mark.parametrize("target", [15, 13, 11])
@pytest.mark.parametrize("name", sorted(n for n in node_cases() if _SUITE.fullmatch(n)))
def test_node_suite_reduction_case_converts_and_gives_the_stored_outputs(
    name: str, target: int
) -> None:
    case = node_cases()[name]
    copy = onnx.ModelProto()
    copy.CopyFrom(case.model)
    model = from_proto(copy)
    convert(model, target)
    proto = to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert not {n.op_type for n in proto.graph.node} & {"ScatterElements", "ScatterND"}
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in proto.graph.input]
    feeds = {n: _array(t) for n, t in zip(names, inputs, strict=True)}
    got = run_onnxruntime(proto, feeds)
    for have, stored in zip(got, outputs, strict=True):
        want = _array(stored)
        assert have.dtype == want.dtype
        np.testing.assert_allclose(have, want, rtol=case.rtol, atol=case.atol)
