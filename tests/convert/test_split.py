"""Converting Split between every pair of its versions (1, 2, 11, 13, 18), with numerics, and
the nodes a version cannot express, refused by name."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from convert.numerics import convert_and_compare

from onnxforge import ir
from onnxforge.errors import AdapterError
from onnxforge.ir import Model
from onnxforge.passes.convert import ConvertOpsetPass, convert
from onnxforge.testing import model_from_text

VERSIONS = (1, 2, 11, 13, 18)
OPSET = {1: 1, 2: 7, 11: 11, 13: 13, 18: 18}
"""The opset each schema version is tested at (Split-2 at 7, where onnxruntime runs it)."""

X = np.arange(28, dtype=np.float32).reshape(7, 4)
X6 = X[:6]


def header(opset: int) -> str:
    return f'<ir_version: {3 if opset < 7 else 8}, opset_import: ["" : {opset}]>'


def split_model(version: int) -> Model:
    """A Split of each version cutting a 7x4 tensor into [3, 3, 1] rows; 11 and later with a
    negative axis, 13 with an int64 initializer, 18 with num_outputs."""
    out = "(float[3,4] y0, float[3,4] y1, float[1,4] y2)"
    body = {
        1: "s = Constant <value = float[3] {3, 3, 1}> ()\ny0, y1, y2 = Split <axis = 0> (x, s)",
        2: "y0, y1, y2 = Split <axis = 0, split = [3, 3, 1]> (x)",
        11: "y0, y1, y2 = Split <axis = -2, split = [3, 3, 1]> (x)",
        13: "y0, y1, y2 = Split <axis = -2> (x, s)",
        18: "y0, y1, y2 = Split <axis = -2, num_outputs = 3> (x)",
    }[version]
    init = " <int64[3] s = {3, 3, 1}>" if version == 13 else ""
    return model_from_text(f"{header(OPSET[version])} g (float[7,4] x) => {out}{init} {{{body}}}")


def split_op(model: Model) -> ir.Op:
    (op,) = [op for op in model.graph.ops if op.op_type == "Split"]
    return op


PAIRS = [(a, b) for a in VERSIONS for b in VERSIONS if a != b]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_split_converts_between_every_pair_of_versions_computing_the_same(
    source: int, target: int
) -> None:
    model = split_model(source)
    convert_and_compare(model, OPSET[target], {"x": X})
    op = split_op(model)
    inputs = model.graph.inputs_of(op)
    if target in (13, 18):
        assert len(inputs) == 2 and "num_outputs" not in op.attrs  # [3, 3, 1]: sizes as input
        assert inputs[1].const is not None and inputs[1].const.numpy().tolist() == [3, 3, 1]
    else:
        assert len(inputs) == 1 and op.attrs["split"] == [3, 3, 1]
    if target < 11:
        assert op.attrs["axis"] == 0
    assert [v.name for v in model.graph.initializers if not model.graph.is_used(v)] == []


# -- 1 <-> 2 ---------------------------------------------------------------------------------
def test_split_1_lengths_input_becomes_the_attribute() -> None:
    model = split_model(1)
    convert(model, 2)
    op = split_op(model)
    assert op.attrs["split"] == [3, 3, 1] and len(model.graph.inputs_of(op)) == 1
    assert [o.op_type for o in model.graph.ops] == ["Split"]  # the Constant went


def test_split_1_lengths_computed_at_run_time_are_refused_naming_the_node() -> None:
    model = model_from_text(
        f"{header(1)} g (float[6,4] x, float[2] s) => (float[2,4] y, float[4,4] z) "
        "{ y, z = Split <axis = 0> (x, s) }"
    )
    model.graph.ops[0].name = "cut"
    with pytest.raises(AdapterError, match=r"Split node 'cut' 1 -> 2: input 1 \('s'\)"):
        convert(model, 2)


def test_split_2_to_1_refuses_an_int32_input_without_allow_cast() -> None:
    model = model_from_text(
        f"{header(7)} g (int32[6,4] x) => (int32[2,4] y, int32[4,4] z) "
        "{ y, z = Split <axis = 0, split = [2, 4]> (x) }"
    )
    with pytest.raises(AdapterError, match="Split-1 does not take int32; allow_cast"):
        convert(model, 1)


def test_split_2_to_1_with_allow_cast_moves_int32_as_double_exactly() -> None:
    model = model_from_text(
        f"{header(7)} g (int32[6,4] x) => (int32[2,4] y, int32[4,4] z) "
        "{ y, z = Split <axis = 0, split = [2, 4]> (x) }"
    )
    x = np.array([[2**31 - 1, -(2**31), 7, -7]] * 6, dtype=np.int32)
    convert_and_compare(model, 1, {"x": x}, allow_cast=True)
    casts = [op for op in model.graph.ops if op.op_type == "Cast"]
    assert [c.attrs["to"] for c in casts] == ["DOUBLE", "INT32", "INT32"]  # Cast-1 names types
    assert [v.name for v in model.graph.outputs] == ["y", "z"]


def test_split_2_to_1_refuses_int64_even_with_allow_cast() -> None:
    model = model_from_text(
        f"{header(7)} g (int64[6,4] x) => (int64[2,4] y, int64[4,4] z) "
        "{ y, z = Split <axis = 0, split = [2, 4]> (x) }"
    )
    with pytest.raises(AdapterError, match="holds every int64 result exactly"):
        convert(model, 1, allow_cast=True)


# -- 2 <-> 11 --------------------------------------------------------------------------------
def test_split_11_negative_axis_is_normalized_with_the_inferred_rank() -> None:
    model = split_model(11)
    convert(model, 10)
    assert split_op(model).attrs["axis"] == 0


def test_split_11_negative_axis_with_unknown_rank_is_refused() -> None:
    model = model_from_text(
        f"{header(11)} g (float[2] x) => (float[1] y, float[1] z) "
        "{ y, z = Split <axis = -1, split = [1, 1]> (x) }"
    )
    model.graph.ops[0].name = "cut"
    model.graph.inputs[0].type = ir.TensorType(ir.DType.FLOAT, None)  # rank unknown
    with pytest.raises(AdapterError, match="'cut' 11 -> 10: axis -1 is negative and the input"):
        convert(model, 10)


# -- 11 <-> 13 -------------------------------------------------------------------------------
def test_split_12_to_13_attribute_becomes_an_int64_initializer_under_a_fresh_name() -> None:
    model = model_from_text(
        f"{header(12)} g (float[6,4] cut_split) => (float[2,4] y, float[4,4] z) "
        "{ y, z = Split <axis = 0, split = [2, 4]> (cut_split) }"
    )
    model.graph.ops[0].name = "cut"
    convert_and_compare(model, 13, {"cut_split": X6})
    (split,) = model.graph.initializers
    assert split.name == "cut_split_1" and split.const.numpy().dtype == np.int64
    assert "split" not in split_op(model).attrs


def test_split_13_split_computed_by_shape_inference_becomes_the_attribute() -> None:
    model = model_from_text(
        f"{header(13)} g (float[6,4] x, float[2,4] w) => (float[2,4] y, float[4,4] z) "
        "{ s = Shape (w)\n y, z = Split <axis = 0> (x, s) }"
    )
    w = np.zeros((2, 4), np.float32)
    convert_and_compare(model, 11, {"x": X6, "w": w})
    assert split_op(model).attrs["split"] == [2, 4]


def test_split_13_split_computed_at_run_time_is_refused_naming_the_node() -> None:
    model = model_from_text(
        f"{header(13)} g (float[N,4] x, int64[2] s) => (float[A,4] y, float[B,4] z) "
        "{ y, z = Split <axis = 0> (x, s) }"
    )
    model.graph.ops[0].name = "cut"
    with pytest.raises(AdapterError, match=r"'cut' 13 -> 12: input 1 \('s'\) is computed"):
        convert(model, 12)


def test_split_13_bfloat16_is_refused_going_to_12_even_with_allow_cast() -> None:
    model = model_from_text(
        f"{header(13)} g (bfloat16[6,4] x) => (bfloat16[3,4] y, bfloat16[3,4] z) "
        "{ y, z = Split <axis = 0> (x) }"
    )
    with pytest.raises(AdapterError, match="Split-11 does not take bfloat16; allow_cast"):
        convert(model, 12)
    model = model_from_text(
        f"{header(13)} g (bfloat16[6,4] x) => (bfloat16[3,4] y, bfloat16[3,4] z) "
        "{ y, z = Split <axis = 0> (x) }"
    )
    with pytest.raises(AdapterError, match="Cast at opset 12 converts to and from"):
        convert(model, 12, allow_cast=True)


def test_split_13_bfloat16_goes_up_to_18() -> None:
    model = model_from_text(
        f"{header(13)} g (bfloat16[6,4] x) => (bfloat16[3,4] y, bfloat16[3,4] z) "
        "{ y, z = Split <axis = 0> (x) }"
    )
    x = X6.astype(ml_dtypes.bfloat16)
    got = convert_and_compare(model, 18, {"x": x}, ours=True)  # onnxruntime takes no bfloat16
    np.testing.assert_array_equal(np.concatenate(got), x)


# -- 13 <-> 18 -------------------------------------------------------------------------------
def test_split_13_without_split_gets_num_outputs_equal_to_its_outputs() -> None:
    model = model_from_text(
        f"{header(13)} g (float[6,4] x) => (float[2,4] a, float[2,4] b, float[2,4] c) "
        "{ a, b, c = Split <axis = 0> (x) }"
    )
    convert_and_compare(model, 18, {"x": X6})
    assert split_op(model).attrs["num_outputs"] == 3


def test_split_18_equal_parts_lose_num_outputs() -> None:
    model = model_from_text(
        f"{header(18)} g (float[6,4] x) => (float[2,4] a, float[2,4] b, float[2,4] c) "
        "{ a, b, c = Split <axis = 0, num_outputs = 3> (x) }"
    )
    convert_and_compare(model, 17, {"x": X6})
    op = split_op(model)
    assert op.attrs == {"axis": 0} and len(model.graph.inputs_of(op)) == 1


def test_split_18_uneven_parts_get_sizes_from_the_inferred_dim() -> None:
    model = model_from_text(
        f"{header(18)} g (float[N,8] x) => (float[N,3] a, float[N,3] b, float[N,2] c) "
        "{ a, b, c = Split <axis = 1, num_outputs = 3> (x) }"
    )
    convert_and_compare(model, 13, {"x": np.arange(16, dtype=np.float32).reshape(2, 8)})
    assert model.graph.inputs_of(split_op(model))[1].const.numpy().tolist() == [3, 3, 2]


def test_split_18_with_a_last_part_of_zero_converts() -> None:
    model = model_from_text(
        f"{header(18)} g (float[4] x) => (float[2] a, float[2] b, float[0] c) "
        "{ a, b, c = Split <num_outputs = 3> (x) }"
    )
    # onnxruntime 1.31 departs from the spec here ("Split size 2 exceeds the remaining size")
    convert_and_compare(model, 11, {"x": np.arange(4, dtype=np.float32)}, ours=True)
    assert split_op(model).attrs["split"] == [2, 2, 0]


def test_split_18_symbolic_dim_that_is_a_multiple_of_the_count_loses_num_outputs() -> None:
    model = model_from_text(
        f"{header(18)} g (float[N,4] x) => (float[N,4] a, float[N,4] b) "
        "{ d = Concat <axis = 0> (x, x)\n a, b = Split <axis = 0, num_outputs = 2> (d) }"
    )
    convert_and_compare(model, 13, {"x": X6})
    assert len(model.graph.inputs_of(split_op(model))) == 1


def test_split_18_unknown_dim_with_maybe_unequal_parts_is_refused_naming_the_node() -> None:
    model = model_from_text(
        f"{header(18)} g (float[N,4] x) => (float[A,4] a, float[B,4] b, float[C,4] c) "
        "{ a, b, c = Split <axis = 0, num_outputs = 3> (x) }"
    )
    model.graph.ops[0].name = "cut"
    with pytest.raises(AdapterError, match="Split node 'cut' 18 -> 17: the split dim is N"):
        convert(model, 17)


def test_split_18_num_outputs_unlike_its_output_count_is_refused() -> None:
    model = model_from_text(
        f"{header(18)} g (float[6,4] x) => (float[3,4] a, float[3,4] b) "
        "{ a, b = Split <axis = 0, num_outputs = 3> (x) }"
    )
    with pytest.raises(AdapterError, match="num_outputs is 3, but the node has 2 outputs"):
        convert(model, 17)  # never run by onnxruntime: it aborts on such a node


def test_split_18_down_to_1_reports_every_blocking_node_at_once() -> None:
    model = model_from_text(
        f"{header(18)} g (float[N,4] x, int64[2] s) => (float[A,4] a, float[B,4] b, "
        "float[C,4] c, float[D,4] d, float[E,4] e) "
        "{ a, b, c = Split <axis = 0, num_outputs = 3> (x)\n d, e = Split <axis = 0> (x, s) }"
    )
    model.graph.ops[0].name, model.graph.ops[1].name = "first", "second"
    with pytest.raises(AdapterError, match="2 blocking node") as info:
        convert(model, 1)
    assert "'first' 18 -> 17" in str(info.value) and "'second' 13 -> 12" in str(info.value)


def test_dry_run_with_apply_lists_adapter_refusals_and_leaves_a_plain_plan_unchanged() -> None:
    model = split_model(18)
    steps = ConvertOpsetPass(1).plan(model)
    assert [s.how for s in steps] == [
        "split_18_17",
        "split_13_12",
        "split_11_10",
        "split_2_1",
    ]
    assert split_op(model).attrs["num_outputs"] == 3  # plan() changes nothing
    model = model_from_text(
        f"{header(13)} g (float[N,4] x, int64[2] s) => (float[A,4] y, float[B,4] z) "
        "{ y, z = Split <axis = 0> (x, s) }"
    )
    assert not [s for s in ConvertOpsetPass(11).plan(model) if s.problem]
    (step,) = ConvertOpsetPass(11).plan(model, apply=True)
    assert step.problem is not None and step.problem.startswith("input 1 ('s')")
