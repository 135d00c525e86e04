"""Automatic mixed precision (issue 28, part 2): the range step keeps the producers and
readers of values float16 cannot hold, the error step the ops whose error grows; each result
is checked on onnx's reference evaluator, which computes float16 in float16 (onnxruntime's
CPU provider runs float16 ops it has no kernel for in float32, unrounded between them).
Calibrated weights-only compression keeps the weights whose rounding moves the outputs past
WEIGHTS_TOLERANCE; its results run on onnxruntime as written (every op in float32)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from onnxforge.api import _mixed_runs
from onnxforge.api._mixed_ops import _Chooser
from onnxforge.api._mixed_precision import (
    WEIGHTS_TOLERANCE,
    Calibration,
    choose_float32_ops,
    choose_float32_weights,
)
from onnxforge.api._mixed_runs import MixedPrecision, _batches
from onnxforge.api.compare import HALF_TOLERANCE, Saturating, range_error
from onnxforge.errors import OnnxForgeError
from onnxforge.io import from_proto, to_proto
from onnxforge.ir import DType, Model
from onnxforge.passes import ConvertPrecisionPass, PassResult
from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text, run_onnxruntime

pytest.importorskip("onnxruntime")

HEADER = '<ir_version: 10, opset_import: ["" : 18]>'
X = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
FEEDS = [{"x": X}]
SQUARES = """
g (float[4, 8] x) => (float[4, 8] y) {
  up = Constant <value = float {1000.0}> ()
  down = Constant <value = float {0.001}> ()
  a = Mul (x, up)
  s = Mul (a, a)
  r = Sqrt (s)
  y = Mul (r, down)
}"""
"""s = (1000 x)^2 passes 65504 where |x| > 0.26; y = |x|."""
CANCELLATION = """
g (float[4, 8] x) => (float[4, 8] d) {
  k = Constant <value = float {1000.0}> ()
  a = Mul (x, k)
  b = Add (a, x)
  d = Sub (b, a)
}"""
"""d = (1000 x + x) - 1000 x: a and b are held to 3 digits in float16, d loses them all."""


def _model(text: str, **weights: np.ndarray) -> Model:
    model = model_from_text(HEADER + text, **weights)
    infer(model)
    return model


def _half_error(
    model: Model, keep: Mapping[str, str], feeds: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, float]:
    """The float16 conversion's first output on the reference evaluator, and its error."""
    half = from_proto(to_proto(model))
    ConvertPrecisionPass("float16", keep_float32=keep)(half)
    want = _evaluate(model, feeds)
    with np.errstate(over="ignore", invalid="ignore"):
        got = _evaluate(half, feeds)
    return got, range_error(want, got)[1]


def _evaluate(model: Model, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    outputs: Any = ReferenceEvaluator(to_proto(model)).run(None, dict(feeds))
    return np.asarray(outputs[0])


def test_value_beyond_float16_keeps_its_producer_and_readers() -> None:
    model = _model(SQUARES)
    before = to_proto(model).SerializeToString()
    found = choose_float32_ops(model, "float16", FEEDS)
    largest = float(((np.float32(1000) * X) ** 2).max())
    why = f"values up to {largest:.2g} exceed float16's 65504"
    assert found.keep == {"s": why, "r": f"reads 's': {why}"}
    assert found.rounds == 1
    assert found.met and 0 < found.errors["y"] <= HALF_TOLERANCE
    assert to_proto(model).SerializeToString() == before
    plain, plain_error = _half_error(model, {}, FEEDS[0])
    assert np.isinf(plain).any() and plain_error == np.inf
    kept, kept_error = _half_error(model, found.keep, FEEDS[0])
    assert np.isfinite(kept).all() and kept_error <= HALF_TOLERANCE


def test_values_all_below_float16s_smallest_keep_their_producer_and_readers() -> None:
    model = _model("""
g (float[4, 8] x) => (float[4, 8] y) {
  lo = Constant <value = float {0.000000001}> ()
  hi = Constant <value = float {1000000000.0}> ()
  t = Mul (x, lo)
  y = Mul (t, hi)
}""")
    found = choose_float32_ops(model, "float16", FEEDS)
    why = (
        f"its nonzero values (up to {float(np.abs(X).max()) * 1e-9:.2g}) all round to 0 in float16"
    )
    assert found.keep == {"t": why, "y": f"reads 't': {why}"}
    assert found.errors == {"y": 0.0}
    plain, plain_error = _half_error(model, {}, FEEDS[0])
    assert not plain.any() and plain_error > HALF_TOLERANCE
    assert _half_error(model, found.keep, FEEDS[0])[1] == 0.0


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_model_within_float16_keeps_nothing(keep_io_types: bool) -> None:
    w = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    model = _model(
        """
g (float[4, 8] x) => (float[4, 3] y) {
  m = MatMul (x, w)
  y = Relu (m)
}""",
        w=w,
    )
    found = choose_float32_ops(model, "float16", FEEDS, keep_io_types=keep_io_types)
    assert found.keep == {}
    assert found.rounds == 1
    assert 0 < found.errors["y"] <= HALF_TOLERANCE


def test_error_growing_in_a_cancellation_keeps_it_and_what_it_amplifies() -> None:
    model = _model(CANCELLATION)
    before = to_proto(model).SerializeToString()
    found = choose_float32_ops(model, "float16", FEEDS)
    assert list(found.keep) == ["d", "a", "b"]
    assert found.keep["d"].startswith("error grows from ")
    grown = float(found.keep["d"].rsplit(" ", 1)[1])
    assert grown > HALF_TOLERANCE
    for key in "ab":
        assert found.keep[key].endswith(f"grows to {grown:.1e} in 'd', which stays float32")
    assert found.rounds == 3
    assert found.errors == {"d": 0.0}
    assert to_proto(model).SerializeToString() == before
    assert _half_error(model, {}, FEEDS[0])[1] > HALF_TOLERANCE
    assert _half_error(model, found.keep, FEEDS[0])[1] <= HALF_TOLERANCE


def test_budget_not_met_in_max_rounds_returns_the_last_measure() -> None:
    found = choose_float32_ops(_model(CANCELLATION), "float16", FEEDS, max_rounds=1)
    assert found.keep == {}
    assert found.rounds == 1
    assert not found.met and found.errors["d"] > HALF_TOLERANCE


def test_bfloat16_keeps_nothing_for_range() -> None:
    found = choose_float32_ops(_model(SQUARES), "bfloat16", FEEDS)
    assert found.keep == {}
    assert 0 < found.errors["y"] <= HALF_TOLERANCE


def test_given_keep_float32_entries_are_kept_first() -> None:
    found = choose_float32_ops(_model(SQUARES), "float16", FEEDS, keep_float32={"Mul": "asked"})
    # s is a Mul, kept already; r, between kept Muls alone, stays float32 in the pass itself
    assert found.keep == {"Mul": "asked"} and found.met


def test_op_with_a_body_is_kept_with_the_ops_inside() -> None:
    model = _model("""
g (float[4, 8] x, bool c) => (float[4, 8] y) {
  big = If (c) <
    then_branch = g1 () => (float[4, 8] t) {
      k = Constant <value = float {1000.0}> ()
      t1 = Mul (x, k)
      t = Mul (t1, t1)
    },
    else_branch = g2 () => (float[4, 8] e) { e = Identity (x) }
  >
  r = Sqrt (big)
  y = Neg (r)
}""")
    found = choose_float32_ops(model, "float16", [{"x": X, "c": np.array(True)}])
    why = f"values up to {float(((np.float32(1000) * X) ** 2).max()):.2g} exceed float16's 65504"
    inside = f"{why} (in the body of 'big')"
    assert found.keep == {
        "big": why,
        "t1": inside,
        "t": inside,
        "e": inside,
        "r": f"reads 'big': {why}",
    }
    assert found.met


def test_batches_split_sets_then_values_within_the_budget() -> None:
    assert _batches({"a": 10, "b": 20}, 3, 100) == [(["a", "b"], range(3))]
    assert _batches({"a": 10, "b": 20}, 5, 60) == [
        (["a", "b"], range(2)),
        (["a", "b"], range(2, 4)),
        (["a", "b"], range(4, 5)),
    ]
    assert _batches({"a": 40, "b": 40, "c": 90}, 2, 100) == [
        (["a", "b"], range(1)),
        (["a", "b"], range(1, 2)),
        (["c"], range(1)),
        (["c"], range(1, 2)),
    ]
    assert _batches({"a": 30, "b": 30, "c": 90}, 4, 130) == [
        (["a", "b"], range(2)),
        (["a", "b"], range(2, 4)),
        *[(["c"], range(i, i + 1)) for i in range(4)],
    ]
    assert _batches({"a": 500}, 2, 100) == [(["a"], range(1)), (["a"], range(1, 2))]
    assert _batches({}, 2, 100) == [([], range(2))]


def test_bad_dtype_and_no_feeds_are_refused() -> None:
    model = _model(SQUARES)
    with pytest.raises(OnnxForgeError, match="'float8'"):
        choose_float32_ops(model, "float8", FEEDS)
    with pytest.raises(OnnxForgeError, match="no input sets"):
        choose_float32_ops(model, "float16", [])


# -- weights only -------------------------------------------------------------------------------
RNG = np.random.default_rng(3)
XW = RNG.standard_normal((16, 8)).astype(np.float32)
WEIGHT_FEEDS = [{"x": XW}]
OFFSET = """
g (float[16, 8] x) => (float[16, 8] y) {
  h = MatMul (x, w)
  bt = Transpose (big)
  a = Add (h, bt)
  k = Constant <value = float {1000.0}> ()
  y = Sub (a, k)
}"""
"""y = x w + (big^T - 1000): float16 holds big's values near 1000 to 0.25, y's range is 10."""
OFFSET_WEIGHTS = {
    "w": RNG.standard_normal((8, 8)).astype(np.float32),
    "big": (1000 + 0.3 * RNG.standard_normal((8, 16))).astype(np.float32),
}
CANCELLING = """
g (float[16, 8] x) => (float[16, 8] d) {
  a = Mul (x, k)
  c = Constant <value = float {1000.0}> ()
  b = Mul (x, c)
  d = Sub (a, b)
}"""
"""d = x k - 1000 x: k's rounding is lost in a, and all that is left of it in d."""


def _weights_error(model: Model, keep: Mapping[str, str]) -> float:
    """The weights-only compression's largest error over the outputs, run as written."""
    small = from_proto(to_proto(model))
    ConvertPrecisionPass("float16", weights_only=True, keep_float32=keep)(small)
    want = run_onnxruntime(model, WEIGHT_FEEDS[0])
    got = run_onnxruntime(small, WEIGHT_FEEDS[0])
    return max(range_error(a, b)[1] for a, b in zip(want, got, strict=True))


def test_weight_whose_rounding_moves_the_output_past_the_budget_is_kept() -> None:
    model = _model(OFFSET, **OFFSET_WEIGHTS)
    before = to_proto(model).SerializeToString()
    plain = _weights_error(model, {})
    assert plain > 10 * WEIGHTS_TOLERANCE
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert list(found.keep) == ["big"]  # read through a Transpose; w's rounding is harmless
    assert found.keep["big"] == f"its rounding moves 'y' by about {plain:.1e} of its range"
    assert found.rounds == 2 and found.met
    assert 0 < found.errors["y"] <= WEIGHTS_TOLERANCE
    assert to_proto(model).SerializeToString() == before
    assert _weights_error(model, found.keep) == pytest.approx(found.errors["y"])


def test_weight_whose_rounding_a_cancellation_lays_bare_is_kept() -> None:
    k = (1000 + 0.01 * RNG.standard_normal((16, 8))).astype(np.float32)
    model = _model(CANCELLING, k=k)
    assert _weights_error(model, {}) > 0.1
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert list(found.keep) == ["k"]
    assert found.keep["k"].startswith("its rounding moves 'd' by about ")
    assert found.errors == {"d": 0.0} and found.rounds == 2


def test_index_output_whose_near_tie_flips_is_judged_on_the_values_it_picks_from() -> None:
    """Rounding moves the logits far within the budget, and still flips the ArgMax of rows
    whose two best differ by less than the rounding: the picks are the original's (pinned)
    and the logits are what is held to the budget, so nothing is kept for a near tie."""
    w = RNG.standard_normal((8, 4)).astype(np.float32)
    w[:, 1] = w[:, 0] + 1e-4 * RNG.standard_normal(8).astype(np.float32)  # below float16's
    model = _model(
        """
g (float[16, 8] x) => (int64[16] i) {
  m = MatMul (x, w)
  s = Add (m, b)
  i = ArgMax <axis = 1, keepdims = 0> (s)
}""",
        w=w,
        b=np.array([0, 0, -100, -100], np.float32),  # 4 values: not compressed
    )
    moved = _weights_error(model, {})  # unpinned: the share of rows whose pick flips
    assert WEIGHTS_TOLERANCE < moved < 1.0
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert found.keep == {} and found.met
    assert found.errors["i"] == 0.0 and 0 < found.errors["s"] <= WEIGHTS_TOLERANCE
    assert found.judged == {"s": "read by ArgMax (unnamed)"}
    n, total = found.flipped["i"]
    assert total == 16 * len(WEIGHT_FEEDS) and round(moved * total) == n > 0


def test_values_a_decision_reads_past_the_budget_keep_what_moves_them() -> None:
    """A cancellation before a comparison: the compared values leave the budget, which the
    pinned picks do not hide; the weight behind them is kept."""
    k = (1000 + 0.01 * RNG.standard_normal((8, 4))).astype(np.float32)
    model = _model(
        """
g (float[16, 8] x) => (bool[16, 4] hit) {
  a = MatMul (x, k)
  b = MatMul (x, k1)
  d = Sub (a, b)
  zero = Constant <value = float {0.0}> ()
  hit = Greater (d, zero)
}""",
        k=k,
        k1=np.full((8, 4), 1000, np.float32),
    )
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert found.judged == {"d": "read by Greater (unnamed)"}
    assert "k" in found.keep and found.met


def test_model_whose_compressed_weights_meet_the_budget_keeps_nothing() -> None:
    w = RNG.standard_normal((8, 3)).astype(np.float32)
    model = _model(
        """
g (float[16, 8] x) => (float[16, 3] y) {
  m = MatMul (x, w)
  y = Relu (m)
}""",
        w=w,
    )
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert found.keep == {} and found.rounds == 1
    assert 0 < found.errors["y"] <= WEIGHTS_TOLERANCE


def test_weight_beyond_float16_is_kept_before_any_error_is_measured() -> None:
    """Compressed, it would be clamped to 65504: the pass keeps it float32 and says why, so
    the first round measures the model exact."""
    w = RNG.standard_normal((8, 8)).astype(np.float32)
    w[2, 3] = 1e5
    model = _model("g (float[16, 8] x) => (float[16, 8] y) { y = MatMul (x, w) }", w=w)
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert found.keep == {}
    assert found.rounds == 1 and found.errors == {"y": 0.0}
    half = from_proto(to_proto(model))
    done = ConvertPrecisionPass("float16", weights_only=True)(half)
    assert done.details["weights_kept_float32"] == ["w: values past float16's 65504"]


def test_weights_budget_not_met_in_max_rounds_returns_the_last_measure() -> None:
    model = _model(OFFSET, **OFFSET_WEIGHTS)
    found = choose_float32_weights(
        model, "float16", WEIGHT_FEEDS, max_rounds=1, keep_float32={"w": "asked"}
    )
    assert found.keep == {"w": "asked"}
    assert found.rounds == 1 and not found.met
    assert found.errors["y"] > WEIGHTS_TOLERANCE


def test_weights_calibration_chooses_for_the_pass_and_the_file_keeps_only_that_weight() -> None:
    model = _model(OFFSET, **OFFSET_WEIGHTS)
    calibration = Calibration("float16", feeds=WEIGHT_FEEDS, weights_only=True)
    assert calibration.budget == WEIGHTS_TOLERANCE
    small = from_proto(to_proto(model))
    result = ConvertPrecisionPass("float16", weights_only=True, choose=calibration)(small)
    assert calibration.result is not None and list(calibration.result.keep) == ["big"]
    assert result.details["weights_kept_float32"] == [f"big: {calibration.result.keep['big']}"]
    assert result.details["weights_compressed"] == ["w"]
    proto = to_proto(small)
    types = {i.name: i.data_type for i in proto.graph.initializer}
    assert types == {"big": TensorProto.FLOAT, "w_float16": TensorProto.FLOAT16}
    casts = [(n.input[0], n.output[0]) for n in proto.graph.node if n.op_type == "Cast"]
    assert casts == [("w_float16", "w")]
    want = run_onnxruntime(model, WEIGHT_FEEDS[0])[0]
    assert range_error(want, run_onnxruntime(proto, WEIGHT_FEEDS[0])[0])[1] <= WEIGHTS_TOLERANCE


def test_weights_calibration_that_cannot_meet_the_budget_says_what_to_change() -> None:
    calibration = Calibration("float16", feeds=WEIGHT_FEEDS, weights_only=True, max_rounds=1)
    with pytest.raises(OnnxForgeError, match=r"0 weights kept.*'y' 0\.01.*--calibrate 0"):
        ConvertPrecisionPass("float16", weights_only=True, choose=calibration)(
            _model(OFFSET, **OFFSET_WEIGHTS)
        )


def test_weight_whose_rounding_turns_an_output_infinite_is_kept() -> None:
    w = (1 + RNG.random((16, 8))).astype(np.float32)
    w[0, 0] = 1e-9  # 0 in float16; the others keep the weight past the range step
    model = _model("g (float[16, 8] x) => (float[16, 8] y) { y = Div (x, w) }", w=w)
    found = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert found.keep == {"w": "'y' turns NaN or infinite with it"}
    assert found.rounds == 2 and found.errors == {"y": 0.0}


def test_twins_are_exposed_in_the_same_run_as_their_ops_when_runs_are_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _model(OFFSET, **OFFSET_WEIGHTS)
    whole = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    monkeypatch.setattr(_mixed_runs, "MEMORY_BUDGET", 2048)  # 4 values of 512 bytes
    split = choose_float32_weights(model, "float16", WEIGHT_FEEDS)
    assert split == whole


def _ort_optimized_error(model: Model, feeds: Mapping[str, np.ndarray], tmp: Any) -> str | None:
    """What onnxruntime (optimizations on, as a user's session) says running ``model`` in a
    child process; None when it runs."""
    from onnxforge._runtime_child import run_in_child

    path = tmp / "probe.onnx"
    path.write_bytes(to_proto(model).SerializeToString())
    return run_in_child("onnxruntime", path, [dict(feeds)], tmp).error


def _half(model: Model, keep: Mapping[str, str]) -> Model:
    half = from_proto(to_proto(model))
    ConvertPrecisionPass("float16", keep_float32=keep)(half)
    return half


def test_op_onnxruntime_crashes_on_in_float16_is_found_by_bisection_and_kept(
    tmp_path: Any,
) -> None:
    """onnxruntime 1.31's optimizer crashes (SIGSEGV, no message) loading a float16 Transpose
    of a batch axis that feeds a MatMul (onnxruntime#28392): PP-OCR's recognizers."""
    w = np.random.default_rng(2).standard_normal((16, 10)).astype(np.float32)
    model = _model(
        """
g (float[2, 3, 16] x) => (float[3, 2, 10] y) {
  s = Relu (x)
  t = Transpose <perm = [1, 0, 2]> (s)
  y = MatMul (t, w)
}""",
        w=w,
    )
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 3, 16)).astype(np.float32)}
    error = _ort_optimized_error(_half(model, {}), feeds, tmp_path)
    if error is None or "crashed" not in error:
        pytest.skip(f"this onnxruntime does not crash on the pattern ({error})")
    found = choose_float32_ops(model, "float16", [feeds])
    assert list(found.keep) == ["t"]
    assert found.keep["t"].startswith("onnxruntime fails on the model with it in float16")
    assert found.met
    assert _ort_optimized_error(_half(model, found.keep), feeds, tmp_path) is None


def _scatters() -> Model:
    """Two ScatterElements with a reduction (no float16 kernel on onnxruntime's CPU) and one
    without, their nodes named n_<output>."""
    model = _model("""
g (float[4, 8] x) => (float[4, 8] y) {
  i = Constant <value = int64[1, 8] {0, 1, 2, 3, 0, 1, 2, 3}> ()
  u = Constant <value = float[1, 8] {1, 2, 3, 4, 5, 6, 7, 8}> ()
  a = ScatterElements <reduction = "add"> (x, i, u)
  b = ScatterElements <reduction = "add"> (a, i, u)
  c = ScatterElements (b, i, u)
  y = Relu (c)
}""")
    for op in model.graph.ops:
        op.name = f"n_{op._outputs[0].name}"
    return model


def test_op_onnxruntime_has_no_float16_kernel_for_is_kept_with_its_like(tmp_path: Any) -> None:
    """onnxruntime's CPU runs ScatterElements with a reduction in float32 only (caustic-nmr,
    minimol): the node its error names, and every converted op of the same form, stay."""
    model = _scatters()
    error = _ort_optimized_error(_half(model, {}), FEEDS[0], tmp_path)
    if error is None:
        pytest.skip("this onnxruntime runs float16 ScatterElements with a reduction")
    found = choose_float32_ops(model, "float16", FEEDS)
    assert set(found.keep) == {"a", "b"}  # c has no reduction: it converts
    assert all(
        why.startswith("onnxruntime cannot run it in float16") for why in found.keep.values()
    )
    assert found.met
    assert _ort_optimized_error(_half(model, found.keep), FEEDS[0], tmp_path) is None


def test_the_load_guard_keeps_the_form_a_load_error_names_without_bisecting(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a calibration, a node onnxruntime names as one it cannot load in float16 is
    kept with every converted op of its form at once, as the calibration keeps it (the
    bisection would probe the model op by op)."""
    model = _scatters()
    loads: list[str] = []

    def refuse(self: Any, conv: Model, names: Any, sets: Any, file: str, *_: Any, **__: Any):
        loads.append(file)
        half = [op.name for op in conv.graph.ops if op.attr("reduction") == "add"
                and op._outputs[0].name in self.converted]  # fmt: skip
        if half:
            return f"NOT_IMPLEMENTED : Could not find an implementation for "\
                f"ScatterElements(16) node with name '{half[0]}'"  # fmt: skip
        return []

    monkeypatch.setattr(_mixed_runs._Runs, "_run", refuse)
    chooser = _Chooser(model, DType.FLOAT16, [{}], tmp_path, tolerance=HALF_TOLERANCE,
                       keep_io_types=True)  # fmt: skip
    keep = chooser.load_guard({})
    assert set(keep) == {"a", "b"}  # c has no reduction: it converts
    assert all(why.startswith("onnxruntime cannot run it in float16") for why in keep.values())
    assert loads == ["load.onnx", "load.onnx"]  # refused, then loads: no bisection probe


def test_dropout_left_in_training_mode_is_measured_as_inference_computes_it() -> None:
    """torch's BERT exported in train mode (torch_bert_dynamo18): each run draws a new mask,
    so no conversion could meet a budget measured on it; the calibration measures the model
    as inference computes it and keeps nothing."""
    w = np.random.default_rng(4).standard_normal((8, 8)).astype(np.float32)
    model = _model(
        """
g (float[4, 8] x) => (float[4, 8] y) {
  ratio = Constant <value = float {0.5}> ()
  on = Constant <value = bool {1}> ()
  d = Dropout (x, ratio, on)
  y = MatMul (d, w)
}""",
        w=w,
    )
    first = run_onnxruntime(model, FEEDS[0])[0]
    again = run_onnxruntime(model, FEEDS[0])[0]
    assert not np.array_equal(first, again)  # the model itself is random
    found = choose_float32_ops(model, "float16", FEEDS)
    assert found.keep == {} and found.met and 0 < found.errors["y"] <= HALF_TOLERANCE
    assert [op.op_type for op in model.graph.ops].count("Dropout") == 1  # not changed


def test_split_runs_run_the_float32_model_once_per_batch_over_every_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Values that do not fit in one run are run in batches; the float32 model's are saved the
    first time, not run again each round (half a 960 x 960 detector's child processes)."""
    whole = choose_float32_ops(_model(CANCELLATION), "float16", FEEDS)
    monkeypatch.setattr(_mixed_runs, "MEMORY_BUDGET", 128)  # one value of 128 bytes a run
    runs: list[str] = []
    original = _mixed_runs._Runs._run

    def counted(self: Any, model: Model, names: Any, sets: Any, file: str, *args: Any, **kw: Any):
        runs.append(file)
        return original(self, model, names, sets, file, *args, **kw)

    monkeypatch.setattr(_mixed_runs._Runs, "_run", counted)
    split = choose_float32_ops(_model(CANCELLATION), "float16", FEEDS)
    assert split == whole and split.rounds == 3
    assert runs.count("converted.onnx") // split.rounds > 1  # split
    first = runs.index("converted.onnx")
    assert runs[:first].count("float32.onnx") > 1  # the range step's, saved
    assert "float32.onnx" not in runs[first:]  # never run again


@pytest.mark.parametrize("cancels", [False, True])
def test_the_kept_ops_weights_are_stored_half_where_the_outputs_allow(cancels: bool) -> None:
    """a and b pass 65504, so they stay float32; their weights are stored in float16 when
    the outputs still meet the budget measured so, and stay float32 when b - a cancels
    what float16 rounds (w2 = w1 + 1e-5 w1)."""
    rng = np.random.default_rng(8)
    w1 = np.clip(2e4 * rng.standard_normal((8, 16)), -6e4, 6e4).astype(np.float32)
    w2 = (w1 * np.float32(1 + 1e-5)).astype(np.float32)
    last = "d = Sub (b, a)" if cancels else "d = Add (b, a)"
    model = _model(f"""
g (float[4, 8] x) => (float[4, 16] d) {{
  a = MatMul (x, w1)
  b = MatMul (x, w2)
  {last}
}}""", w1=w1, w2=w2)  # fmt: skip
    found = choose_float32_ops(model, "float16", FEEDS)
    assert {"a", "b", "d"} <= set(found.keep)
    assert all("65504" in found.keep[k] for k in ("a", "b"))
    assert found.met and found.store_kept_weights is not cancels
    half = from_proto(to_proto(model))
    done = ConvertPrecisionPass(
        "float16", keep_float32=found.keep, store_kept_weights=found.store_kept_weights, asked={}
    )(half)
    assert sorted(done.details.get("weights_compressed", [])) == ([] if cancels else ["w1", "w2"])
    got = run_onnxruntime(to_proto(half), FEEDS[0])[0]
    want = run_onnxruntime(to_proto(model), FEEDS[0])[0]
    assert range_error(want, got)[1] <= HALF_TOLERANCE / 2


def test_the_kept_weights_whose_rounding_misses_the_budget_stay_float32_the_rest_halve() -> None:
    """a, b and e pass 65504, so they stay float32 (d with them). Stored in float16, w1 and
    w2 lose what b - a keeps (w2 = w1 + 1e-5 w1), and no op kept float32 brings it back;
    w3's rounding moves e by 1e-4 of its range. So w1 and w2 stay float32 and w3 is stored
    in float16 (before, all three stayed float32 and the file did not shrink)."""
    rng = np.random.default_rng(8)
    w1 = np.clip(2e4 * rng.standard_normal((8, 16)), -6e4, 6e4).astype(np.float32)
    w2 = (w1 * np.float32(1 + 1e-5)).astype(np.float32)
    w3 = np.clip(2e4 * rng.standard_normal((8, 16)), -6e4, 6e4).astype(np.float32)
    model = _model("""
g (float[4, 8] x) => (float[4, 16] d, float[4, 16] e) {
  a = MatMul (x, w1)
  b = MatMul (x, w2)
  d = Sub (b, a)
  e = MatMul (x, w3)
}""", w1=w1, w2=w2, w3=w3)  # fmt: skip
    found = choose_float32_ops(model, "float16", FEEDS)
    assert {"a", "b", "d", "e"} <= set(found.keep)
    assert found.met and found.store_kept_weights
    assert sorted(found.float32_weights) == ["w1", "w2"]
    done, half = _stored_as_chosen(model, found)
    assert done.details.get("weights_compressed") == ["w3"]
    for feeds in FEEDS:
        want = run_onnxruntime(to_proto(model), feeds)
        got = run_onnxruntime(to_proto(half), feeds)
        assert all(range_error(w, g)[1] <= HALF_TOLERANCE for w, g in zip(want, got, strict=True))
    everything = from_proto(to_proto(model))  # every kept weight stored: d is lost
    ConvertPrecisionPass("float16", keep_float32=found.keep, store_kept_weights=True, asked={})(
        everything
    )
    want = run_onnxruntime(to_proto(model), FEEDS[0])[0]
    assert range_error(want, run_onnxruntime(to_proto(everything), FEEDS[0])[0])[1] > 0.1


def _stored_as_chosen(model: Model, found: MixedPrecision) -> tuple[PassResult, Model]:
    """A float16 copy of ``model`` with what ``found`` keeps, the kept ops' weights stored
    half but its ``float32_weights``."""
    half = from_proto(to_proto(model))
    done = ConvertPrecisionPass(
        "float16", keep_float32=found.keep, store_kept_weights=True, asked={},
        float32_weights=found.float32_weights,
    )(half)  # fmt: skip
    return done, half


def _weight_on_the_grid_model() -> Model:
    """a = x w1 passes 65504, so a and its reader s stay float32; w1 sits just above
    float16's grid (0.9 of half a step, every element the same share), so storing it in
    float16 moves s by 2.2e-4 of itself, all one way; c1..c4 compute in float16."""
    rng = np.random.default_rng(8)
    w = np.clip(2e4 * rng.standard_normal((8, 16)), -6e4, 6e4).astype(np.float16)
    w1 = (w.astype(np.float32) * np.float32(1 + 0.9 * 2**-12)).astype(np.float32)
    w3 = rng.standard_normal((8, 16)).astype(np.float32)
    return _model("""
g (float[4, 8] x) => (float[4, 16] d) {
  a = MatMul (x, w1)
  k = Constant <value = float {0.001}> ()
  s = Mul (a, k)
  c1 = Mul (x, x)
  c2 = Mul (c1, x)
  c3 = Sum (c2, x, c1)
  c4 = MatMul (c3, w3)
  d = Add (s, c4)
}""", w1=w1, w3=w3)  # fmt: skip


def test_where_the_stored_weights_miss_the_budget_more_ops_stay_float32_for_them() -> None:
    """a passes 65504 and stays float32 with its reader s; w1 sits just above float16's
    grid (0.9 of half a step, every element the same share), so storing it in float16 moves
    s by 2.2e-4 of itself, all one way. The ops alone meet the budget (1.8e-4 of d's range);
    with w1 stored the output misses it (3.3e-4), and a further round keeps c1 in float32
    too, which costs no bytes, so w1 is stored and the output meets it."""
    model = _weight_on_the_grid_model()
    tolerance = 2.5e-4
    alone = choose_float32_ops(model, "float16", FEEDS, tolerance=tolerance, max_rounds=1)
    assert set(alone.keep) == {"a", "s"} and alone.met and not alone.store_kept_weights
    found = choose_float32_ops(model, "float16", FEEDS, tolerance=tolerance)
    assert found.met and found.store_kept_weights
    assert set(found.keep) > {"a", "s"}
    assert found.rounds > 2
    half = from_proto(to_proto(model))
    done = ConvertPrecisionPass(
        "float16", keep_float32=found.keep, store_kept_weights=True, asked={}
    )(half)
    assert done.details.get("weights_compressed") == ["w1"]
    want = _evaluate(model, FEEDS[0])  # float16 computed in float16, as a GPU does
    assert range_error(want, _evaluate(half, FEEDS[0]))[1] <= tolerance
    stored_too = from_proto(to_proto(model))  # the first round's ops, w1 stored
    ConvertPrecisionPass("float16", keep_float32=alone.keep, store_kept_weights=True, asked={})(
        stored_too
    )
    assert range_error(want, _evaluate(stored_too, FEEDS[0]))[1] > tolerance


def test_where_the_ops_leave_the_weights_no_room_the_weights_are_chosen_first(
    tmp_path: Any,
) -> None:
    """The model of the test above: its ops alone (a and s kept) measure 1.8e-4 of d's range
    against 2.5e-4, and w1 stored beside them misses it. Chosen the other way round, the
    weights first (every one stored: 1e-4 alone), then the ops on the model with them
    rounded, c1 stays float32 too, which costs no bytes, and w1 is stored (caustic: 0.75x
    the original before, 0.55x). Before, w1 stayed float32."""
    model = _weight_on_the_grid_model()
    tolerance = 2.5e-4
    chooser = _Chooser(
        model, DType.FLOAT16, FEEDS, tmp_path, tolerance=tolerance, keep_io_types=True
    )
    ops = chooser.choose({}, 1, weights_settled=True)  # the ops alone, one round
    assert set(ops.keep) == {"a", "s"} and ops.met and not ops.store_kept_weights
    want = _evaluate(model, FEEDS[0])  # float16 computed in float16, as a GPU does
    stored = from_proto(to_proto(model))
    ConvertPrecisionPass("float16", keep_float32=ops.keep, store_kept_weights=True, asked={})(
        stored
    )
    assert range_error(want, _evaluate(stored, FEEDS[0]))[1] > tolerance

    # three rounds: one more with w1 stored misses, and storing it alone meets only a
    # share the ops leave too little of
    found = choose_float32_ops(model, "float16", FEEDS, tolerance=tolerance, max_rounds=3)
    assert found.met
    assert found.store_kept_weights and found.float32_weights == {}
    assert set(found.keep) > {"a", "s"}
    half = from_proto(to_proto(model))
    done = ConvertPrecisionPass(
        "float16", keep_float32=found.keep, store_kept_weights=True, asked={}
    )(half)
    assert done.details.get("weights_compressed") == ["w1"]
    assert range_error(want, _evaluate(half, FEEDS[0]))[1] <= tolerance
    assert [op.op_type for op in model.graph.ops].count("Cast") == 0  # not changed


@pytest.mark.parametrize(("tolerance", "stored"), [(2.5e-4, True), (1.5e-4, False)])
def test_a_weight_kept_for_its_share_is_stored_half_where_the_whole_meets_the_budget(
    tmp_path: Any, tolerance: float, stored: bool
) -> None:
    """The kept-weights steps choose float32 weights against a share of the budget (what
    the ops leave, or WEIGHTS_FIRST_SHARE): a split to search by. Held float32 that way, w1
    is stored half after all where the model measured so meets the budget: with a, s and
    c1 kept it measures 1.5e-4 of d's range (caustic: a 49,280-value weight, 0.55x the
    original)."""
    model = _weight_on_the_grid_model()
    found = choose_float32_ops(model, "float16", FEEDS, tolerance=2.5e-4, max_rounds=3)
    assert set(found.keep) == {"a", "s", "c1"} and found.store_kept_weights
    chooser = _Chooser(
        model, DType.FLOAT16, FEEDS, tmp_path, tolerance=tolerance, keep_io_types=True
    )
    chooser.budget = tolerance
    chooser._range()
    chooser.store_kept_weights, chooser.float32_weights = True, {"w1": "its share"}
    held = MixedPrecision(
        dict(found.keep), {"d": 0.0}, 3, tolerance, store_kept_weights=True,
        float32_weights={"w1": "its share"},
    )  # fmt: skip
    back = chooser._given_back(held)
    assert back.float32_weights == ({} if stored else {"w1": "its share"})
    assert (back is held) is not stored
    if stored:
        assert 1e-4 < back.errors["d"] <= tolerance and back.rounds == 4
        done, half = _stored_as_chosen(model, back)
        assert done.details.get("weights_compressed") == ["w1"]
        want = _evaluate(model, FEEDS[0])
        assert range_error(want, _evaluate(half, FEEDS[0]))[1] <= tolerance


def test_when_no_round_meets_the_budget_the_round_that_measured_least_stands(
    tmp_path: Any,
) -> None:
    """Keeping more can undo errors that cancelled (caustic's weights: 6.9e-4 at round 3,
    1.08e-3 at round 8): the result is the round that measured least, with what it kept."""
    measured = iter([4e-3, 2e-3, 3e-3])

    class Scripted(_mixed_runs._Runs):
        tolerance = 1e-3

        def _convert(self, keep: Mapping[str, str]) -> Model:
            return self.base

        def _measure_round(self, conv: Model) -> _mixed_runs._Measured:
            return _mixed_runs._Measured(outputs={"y": next(measured)})

        def _pick(self, measured: Any, keep: Mapping[str, str], failing: Any) -> dict[str, str]:
            return {f"op{len(keep)}": "scripted"}

    runs = Scripted(_model(SQUARES), FEEDS, tmp_path)
    keep: dict[str, str] = {}
    found = runs._rounds(keep, runs.base, max_rounds=3)
    assert found.keep == keep == {"op0": "scripted"}
    assert found.errors == {"y": 2e-3} and found.rounds == 3 and not found.met


@pytest.mark.parametrize(
    ("budget", "rounds", "error"), [(2e-3, 3, 1.5e-3), (5e-3, 2, 3e-3), (1e-4, 4, 8e-4)]
)
def test_rounds_go_on_past_max_rounds_only_while_an_output_is_past_the_budget(
    tmp_path: Any, budget: float, rounds: int, error: float
) -> None:
    """The rounds aim at the tolerance; where max_rounds run out with an output past the
    budget (a refusal), ``more`` rounds follow, and stop once it is within (Multilingual
    PP-OCRv3 det: 1.74e-2 after 12 rounds, within 1e-2 at 15). An estimate past the budget
    does not refuse, so it buys no more rounds."""
    measured = iter([4e-3, 3e-3, 1.5e-3, 8e-4, 5e-4])

    class Scripted(_mixed_runs._Runs):
        tolerance = 5e-4

        def _convert(self, keep: Mapping[str, str]) -> Model:
            return self.base

        def _measure_round(self, conv: Model) -> _mixed_runs._Measured:
            error = next(measured)
            return _mixed_runs._Measured(outputs={"y": error, "estimate": 10 * error})

        def _pick(self, measured: Any, keep: Mapping[str, str], failing: Any) -> dict[str, str]:
            return {f"op{len(keep)}": "scripted"}

    runs = Scripted(_model(SQUARES), FEEDS, tmp_path)
    runs.middles = {"estimate": Saturating("y")}
    runs.budget = budget
    found = runs._rounds({}, runs.base, max_rounds=2, more=2)
    assert found.rounds == rounds and found.errors["y"] == error
    assert len(found.keep) == rounds - 1


def test_a_weights_round_that_measures_no_less_halves_the_aim_of_the_next(
    tmp_path: Any,
) -> None:
    """The weight chooser's estimates were too kind when a round measures no less than an
    earlier one: the next aims at half, and keeps more (PP-OCRv6's tiny detector went from
    4.8e-3 to 1.4e-3 in 8 rounds at a constant aim, and not below)."""
    from onnxforge.api._mixed_weights import AIM, _WeightChooser

    rng = np.random.default_rng(5)
    big = (1000 + rng.standard_normal((8, 8))).astype(np.float32)  # rounds by up to 0.25
    small = rng.standard_normal((8, 8)).astype(np.float32)  # by up to 2.4e-4
    model = _model(
        """
g (float[16, 8] x) => (float[16, 8] y) {
  a = MatMul (x, big)
  b = MatMul (x, small)
  y = Add (a, b)
}""",
        big=big,
        small=small,
    )
    chooser = _WeightChooser(model, DType.FLOAT16, WEIGHT_FEEDS, tmp_path, tolerance=1.0)
    chooser._run_float32(chooser.base)
    alone = chooser._measure_round(chooser._convert({"big": "asked"})).outputs["y"]
    measured = chooser._measure_round(chooser._convert({}))
    chooser.tolerance = alone / (AIM * 0.75)  # the small weight's rounding fits, not in half
    first = chooser._pick(measured, {}, ["y"])
    again = chooser._pick(measured, {}, ["y"])
    assert chooser.stalls == 1
    assert set(first) < set(again) == {"big", "small"}


SATURATED = """
g (float[16, 8] x) => (float[16, 1] p) {
  z = MatMul (x, w)
  p = Sigmoid (z)
}"""
"""z = x . w with weights of about 1000: random inputs give |z| of hundreds, where the Sigmoid
is flat; float16's rounding of the products (0.5 at 1000) moves z by about 1 everywhere."""


def test_a_saturated_sigmoid_is_measured_where_it_is_not_saturated() -> None:
    """Random inputs make p exactly 0 or 1, float16 or not, so the outputs alone keep
    nothing; an input near the middle (z about 0) is then off by about a quarter. The rounds
    aim at the error z carries where |z| is least, times the Sigmoid's slope there, 1/4."""
    w = (1000 * RNG.standard_normal((8, 1))).astype(np.float32)
    model = _model(SATURATED, w=w)
    feeds = [{"x": RNG.standard_normal((16, 8)).astype(np.float32)} for _ in range(2)]
    plain, error = _half_error(model, {}, feeds[0])
    assert error == 0.0  # saturated: the output hides it
    found = choose_float32_ops(model, "float16", feeds)
    assert "z" in found.keep and found.met
    assert found.estimates == {"z"} and found.judged["z"].startswith("Sigmoid's input")
    assert found.errors["z"] <= HALF_TOLERANCE / 2
    middle = np.zeros((16, 8), np.float32)  # z near 0: the Sigmoid's steepest
    middle[:, 0] = 0.3 / w[0, 0] * np.arange(16)
    middle[:, 1] = RNG.standard_normal(16).astype(np.float32)
    middle[:, 0] -= middle[:, 1] * w[1, 0] / w[0, 0]
    want = _evaluate(model, {"x": middle})
    assert np.ptp(want) > 0.4  # not saturated
    _, unkept = _half_error(model, {}, {"x": middle})
    _, kept = _half_error(model, found.keep, {"x": middle})
    assert unkept > HALF_TOLERANCE and kept <= HALF_TOLERANCE


def test_an_image_models_random_calibration_alternates_noise_and_scenes(monkeypatch: Any) -> None:
    """Noise keeps a detector's map saturated where real images do not (PP-OCRv3's English text
    detector calibrated on noise alone was 1.3e-2 off on rendered text pages): each size is
    calibrated on noise and on scenes; a model without an image input on noise alone."""
    seen: list[list[dict[str, np.ndarray]]] = []

    def record(self: Calibration, model: Model, feeds: Any) -> Any:
        seen.append(list(feeds))
        return _mixed_runs.MixedPrecision({}, {}, 1)

    monkeypatch.setattr(Calibration, "_choose", record)
    conv = _model(
        "g (float[N, 3, H, W] x) => (float[N, 2, H, W] y) { y = Conv (x, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    Calibration("float16", runs=5)(conv)
    images = [f["x"] for f in seen[-1]]
    assert [a.shape[-1] for a in images] == [64, 32, 64, 32, 64]
    colors = [len({tuple(p) for p in a.transpose(0, 2, 3, 1).reshape(-1, 3)}) for a in images]
    assert [c <= 60 for c in colors] == [False, False, True, True, False]
    Calibration("float16", runs=4)(_model(CANCELLATION))
    assert all(len(np.unique(f["x"])) == X.size for f in seen[-1])  # noise every time


def test_runs_are_sized_by_the_feeds_then_by_what_the_float32_run_gave(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unnamed batch dim gets a name from each inference: a model inferred before (as
    the CLI's is) keeps the earlier name inside while the input gets a new one, which no
    feed binds, and the estimate took it as the largest input dim (v-ppocr's PP-OCRv3
    detector: one value and one input set per run, 4 min before the float32 run gave the
    sizes). The estimate now binds it; a size no shape gives (Compress) is the float32
    run's once it has run."""
    model = _model(
        "g (float[?, 64] x) => (float[?, 64] y, float[?] z) {"
        " a = Tanh (x)  b = Sigmoid (a)  c = Mul (a, b)  y = Add (c, x)"
        " flat = Reshape (x, minus_one)  keep = Greater (flat, zero)"
        " z = Compress (flat, keep) }",
        minus_one=np.array([-1], np.int64),
        zero=np.array(0.0, np.float32),
    )
    infer(model)  # names the batch dim inside
    monkeypatch.setattr(_mixed_runs, "MEMORY_BUDGET", 4096)
    feeds = [{"x": RNG.standard_normal((1, 64)).astype(np.float32)} for _ in range(3)]
    chooser = _Chooser(model, DType.FLOAT16, feeds, tmp_path, tolerance=HALF_TOLERANCE,
                       keep_io_types=True)  # fmt: skip
    values = [chooser.values[n] for n in ("a", "b", "c")]
    assert chooser._batches(values) == [(["a", "b", "c"], range(0, 3))]  # one row of 64 each
    assert chooser._estimates()["a"] == 64 * 4
    assert chooser._estimates()["z"] == 64 * 4  # its length: the largest input dim
    chooser._run_float32(chooser.base)
    positives = max(int((f["x"] > 0).sum()) for f in feeds)
    assert chooser.known["a"] == 64 * 4
    assert chooser.known["z"] == positives * 4 < 64 * 4
