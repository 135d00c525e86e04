"""Dims the wild corpus left unknown that are one size in every run the model can make, each
checked on onnxruntime at several sizes (1 included, where the model runs there):
- a product of sizes that are each 1 or more (Conv outputs) is 1 or more, so a Reshape to it
  does not copy (YOLO attention's ``[B, 2, 128, h*w]``);
- ``max(0, N-14)`` is never negative (madmom's strided frames, Reshape ``[M, -1]``);
- a dim that is never 1 (an upsampled ``2*floor((H+31)/32)``) is what it broadcasts with
  another to (PP-OCR det's FPN ``Add``);
- onnxruntime cannot run an LSTM of batch 0, so the batch is a fact (TF's Tensordot Reshape
  after an LSTM: ``[B*S, 32] -> [B, S, 32]``)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge import io
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import at_least_one, evaluate, never_one
from onnxforge.testing import model_from_text

ort = pytest.importorskip("onnxruntime")


def _check(text: str, feeds_at: list[dict[str, np.ndarray]], bindings: list[dict[str, int]]):
    """Infer, then every output's shape evaluated at each binding is onnxruntime's; returns the
    inferred output shapes."""
    model = model_from_text(text)
    proto = io.to_proto(model)
    report = infer(model)
    assert report.ok, report.errors
    shapes = [v.type.shape for v in model.graph.outputs]
    session = ort.InferenceSession(proto.SerializeToString())
    for feeds, bound in zip(feeds_at, bindings, strict=True):
        got = session.run(None, feeds)
        for shape, array in zip(shapes, got, strict=True):
            assert shape is not None
            assert [evaluate(d, bound) for d in shape] == list(array.shape), (shape, bound)
    return shapes


def test_symbolic_at_least_one_and_never_one() -> None:
    facts = {"floor((H+31)/32)", "floor((W+31)/32)"}
    assert at_least_one("floor((H+31)/32)*floor((W+31)/32)", facts)
    assert at_least_one("2*floor((H+31)/32)+N", facts)
    assert not at_least_one("floor((H+31)/32)*N", facts)  # N may be 0
    assert not at_least_one("floor((H+31)/32)-1", facts)
    assert at_least_one("ceil(N/4)", {"N"}) and not at_least_one("floor(N/4)", {"N"})
    assert at_least_one("floor((N+4)/4)")
    assert at_least_one("max(N, 1)") and not at_least_one("min(N, 1)")
    for dim, expected in {
        "2*floor((H+31)/32)": True, "2*N+3": True, "3*N+2": True, "N+2": True,
        "4*N*M+2": True, "N": False, "2*N+1": False, "N-1": False, 2: True, 1: False,
    }.items():  # fmt: skip
        assert never_one(dim) is expected, dim


def test_reshape_to_a_product_of_conv_sizes_is_that_product() -> None:
    shapes = _check(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[B, 4, H, W] x) => (float[?, ?, ?, ?] y) {
        w = Constant <value = float[8, 4, 3, 3] {"""
        + ", ".join(["0.01"] * 288)
        + """}> ()
        c = Conv <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)
        shape = Shape(c)
        i0 = Constant <value = int64 {0}> ()
        i2 = Constant <value = int64 {2}> ()
        i3 = Constant <value = int64 {3}> ()
        b = Gather(shape, i0)
        h = Gather(shape, i2)
        v = Gather(shape, i3)
        hw = Mul(h, v)
        ax = Constant <value = int64[1] {0}> ()
        b1 = Unsqueeze(b, ax)
        hw1 = Unsqueeze(hw, ax)
        two = Constant <value = int64[2] {2, 4}> ()
        target = Concat <axis = 0> (b1, two, hw1)
        y = Reshape(c, target)
    }""",
        [
            {"x": np.ones((b, 4, h, w), np.float32)}
            for b, h, w in ((2, 5, 7), (1, 1, 1), (3, 8, 2))
        ],
        [{"B": b, "H": h, "W": w} for b, h, w in ((2, 5, 7), (1, 1, 1), (3, 8, 2))],
    )
    assert shapes[0][3] == "floor((H+1)/2)*floor((W+1)/2)"


def test_reshape_of_frames_counted_by_a_max_of_zero() -> None:
    """[:-6] of [T-8, 20] is max(0, T-14) long: never negative, and the -1 beside it makes it
    at least 1 in every run."""
    sizes = (20, 15, 30)
    shapes = _check(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 20] x) => (float[?, ?] y) {
        s0 = Constant <value = int64[1] {8}> ()
        e0 = Constant <value = int64[1] {9223372036854775807}> ()
        a0 = Constant <value = int64[1] {0}> ()
        t = Slice(x, s0, e0, a0)
        z = Constant <value = int64[1] {0}> ()
        e = Constant <value = int64[1] {-6}> ()
        f = Slice(t, z, e, a0)
        shape = Shape(f)
        first = Gather <axis = 0> (shape, a0)
        m1 = Constant <value = int64[1] {-1}> ()
        target = Concat <axis = 0> (first, m1)
        y = Reshape(f, target)
    }""",
        [{"x": np.ones((t, 20), np.float32)} for t in sizes],
        [{"T": t} for t in sizes],
    )
    assert shapes[0][1] == 20 and "T" in str(shapes[0][0])  # resolved (and right, above)


def test_an_upsampled_size_is_what_it_broadcasts_to() -> None:
    """floor((H+15)/16) beside 2*floor((H+31)/32): equal at multiples of 32, 1 against 2 below
    17, and no run where the even one is 1 (H = 48 gives 3 against 4: the model fails)."""
    sizes = (32, 64, 16, 1)
    shapes = _check(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 1, H, 8] x) => (float[?, ?, ?, ?] y) {
        w = Constant <value = float[1, 1, 1, 1] {1.0}> ()
        a = Conv <strides = [16, 1]> (x, w)
        b = Conv <strides = [32, 1]> (x, w)
        roi = Constant <value = float[0] {}> ()
        scales = Constant <value = float[4] {1.0, 1.0, 2.0, 1.0}> ()
        up = Resize <mode = "nearest"> (b, roi, scales)
        y = Add(a, up)
    }""",
        [{"x": np.ones((1, 1, h, 8), np.float32)} for h in sizes],
        [{"H": h} for h in sizes],
    )
    assert shapes[0][2] == "2*floor((H+31)/32)"


def test_reshape_after_an_lstm_keeps_batch_and_sequence() -> None:
    """TF's Tensordot: [B*S, 4] back to [B, S, 4]. At S = 0 the 0 would copy the 4, which
    fits only at B = 0, where onnxruntime's LSTM cannot run."""
    rng = np.random.default_rng(0)
    weights = ", ".join(f"{v:.3f}" for v in rng.standard_normal(16 * 3))
    recurrent = ", ".join(f"{v:.3f}" for v in rng.standard_normal(16 * 4))
    sizes = ((2, 3), (1, 1), (0, 3))  # (S, B); batch 0 would abort onnxruntime
    shapes = _check(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[S, B, 3] x) => (float[?, ?, ?] y) {
        w = Constant <value = float[1, 16, 3] {"""
        + weights
        + """}> ()
        r = Constant <value = float[1, 16, 4] {"""
        + recurrent
        + """}> ()
        seq = LSTM <hidden_size = 4> (x, w, r)
        ax = Constant <value = int64[1] {1}> ()
        h = Squeeze(seq, ax)
        flat_shape = Constant <value = int64[2] {-1, 4}> ()
        flat = Reshape(h, flat_shape)
        shape = Shape(h)
        z = Constant <value = int64[1] {0}> ()
        two = Constant <value = int64[1] {2}> ()
        sb = Slice(shape, z, two)
        four = Constant <value = int64[1] {4}> ()
        target = Concat <axis = 0> (sb, four)
        y = Reshape(flat, target)
    }""",
        [{"x": np.ones((s, b, 3), np.float32)} for s, b in sizes],
        [{"S": s, "B": b} for s, b in sizes],
    )
    assert shapes[0] == ("S", "B", 4)


@pytest.mark.parametrize(
    ("body", "weights", "want"),
    [
        ("y, h, c = LSTM <hidden_size = 2> (x, w, r)",
         {"w": (1, 8, 7), "r": (1, 8, 2)}, ("F", 7)),
        ("y, h = GRU <hidden_size = 2> (x, w, r)",
         {"w": (2, 6, 7), "r": (2, 6, 2)}, ("F", 7)),
        ("y = Conv <group = 2> (x, w)", {"w": (4, 3, 1, 1)}, ("F", 6)),
        ("y = MatMul (x, w)", {"w": (4, 7)}, ("F", 4)),
    ],
)  # fmt: skip
def test_a_data_dim_a_weight_fixes_is_an_assumption(body, weights, want) -> None:
    """madmom's [frames, features] input reaches an LSTM whose W fixes the features (138):
    inference records it, and random inputs take that size (``sizes_fixed_by_weights``)."""
    rng = np.random.default_rng(0)
    inputs = {k: rng.standard_normal(s).astype(np.float32) for k, s in weights.items()}
    rank = 4 if "Conv" in body else 3
    dims = "S, F, H, W" if rank == 4 else "S, B, F"
    model = model_from_text(
        f'<ir_version: 8, opset_import: ["" : 17]> g (float[{dims}] x) => (float y) {{ {body} }}',
        **inputs,
    )
    report = infer(model, verify=False)
    found = [(a.a, a.b) for a in report.assumptions]
    assert found == [want]
