"""Automatic mixed precision (issue 28, part 2): the range step keeps the producers and
readers of values float16 cannot hold, the error step the ops whose error grows; each result
is checked on onnx's reference evaluator, which computes float16 in float16 (onnxruntime's
CPU provider runs float16 ops it has no kernel for in float32, unrounded between them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from onnxforge.api._mixed_precision import _batches, choose_float32_ops
from onnxforge.api.compare import HALF_TOLERANCE, range_error
from onnxforge.errors import OnnxForgeError
from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model
from onnxforge.passes import ConvertPrecisionPass
from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text

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
    assert list(found.keep) == ["Mul", "r"]  # s is a Mul: kept already
    assert found.keep["Mul"] == "asked"
    assert found.keep["r"].startswith("reads 's': values up to ")


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
