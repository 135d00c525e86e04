"""onnxforge.api.compare: the proof `optimize --check` gives, and the inputs it makes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnxforge.api.compare import (
    CloseCall,
    InputSizes,
    Saturating,
    close_call_error,
    close_call_inputs,
    compare_on_onnxruntime,
    middle_error,
    random_inputs,
    range_error,
    saturating_inputs,
)
from onnxforge.errors import OnnxForgeError
from onnxforge.io import save
from onnxforge.ir import DType, TensorType
from onnxforge.testing import model_from_text

pytest.importorskip("onnxruntime")

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _saved(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    save(model_from_text(HEADER + body), path)
    return path


def test_random_inputs_fill_symbolic_dims_and_keep_integers_small() -> None:
    model = model_from_text(
        HEADER + " g (float[N, 3, S] x, int64[N, S] ids) => (float[N, 3, S] y) { y = Relu(x) }"
    )
    (feeds,) = random_inputs(model, 1)
    assert feeds["x"].shape == (2, 3, 5) and feeds["x"].dtype == np.float32
    assert feeds["ids"].shape == (2, 5) and set(np.unique(feeds["ids"])) <= {0, 1}


def test_a_dim_name_has_one_size_in_every_input_that_names_it() -> None:
    # caustic-nmr: edge_index [2, num_edges] beside edge_dist [num_edges]; by position alone
    # num_edges was 5 in one and 2 in the other, and the model could not run.
    model = model_from_text(
        HEADER + " g (int64[2, E] index, float[E] dist, float[E, B] other) => (float[E] y)"
        " { y = Relu(dist) }"
    )
    (feeds,) = random_inputs(model, 1)
    assert feeds["index"].shape == (2, 5) and feeds["dist"].shape == (5,)
    assert feeds["other"].shape == (5, 5)


def test_an_image_models_unknown_sides_are_sized_like_an_image() -> None:
    """PP-OCR's detectors need sides that are multiples of 32: at 5 x 5 they do not run."""
    model = model_from_text(
        HEADER + " g (float[N, 3, H, W] x, float[N, 4] box) => (float[N, 2, H, W] y)"
        " { y = Conv(x, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    (feeds,) = random_inputs(model, 1)
    assert feeds["x"].shape == (1, 3, 64, 64)
    assert feeds["box"].shape == (1, 4)  # N is one size everywhere
    flat = model_from_text(
        HEADER + " g (float[N, 3, H, W] x) => (float[N, 3, H, W] y) { y = Relu(x) }"
    )
    assert random_inputs(flat, 1)[0]["x"].shape == (2, 3, 5, 5)  # no convolution: no image
    nhwc = model_from_text(
        HEADER + " g (float[N, H, W, 3] x) => (float[N, 2, H, W] y)"
        " { t = Transpose<perm = [0, 3, 1, 2]>(x)  y = Conv(t, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    assert random_inputs(nhwc, 1)[0]["x"].shape == (1, 64, 64, 3)  # channels last
    fixed = model_from_text(
        HEADER + " g (float[N, 3, 32, 32] x) => (float[N, 2, 32, 32] y) { y = Conv(x, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    assert random_inputs(fixed, 1)[0]["x"].shape == (1, 3, 32, 32)  # batch 1 at fixed sides
    pixels = model_from_text(
        HEADER + " g (uint8[N, H, W, 3] x) => (float[N, 2, H, W] y)"
        " { f = Cast<to = 1>(x)  t = Transpose<perm = [0, 3, 1, 2]>(f)  y = Conv(t, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    image = random_inputs(pixels, 1)[0]["x"]
    assert image.shape == (1, 64, 64, 3) and image.max() > 200  # pixels, not a mask's 0 and 1


def test_an_integer_outputs_error_is_the_share_of_its_elements_that_differ() -> None:
    want = np.arange(200, dtype=np.int64) % 7
    got = want.copy()
    got[:3] = (got[:3] + 1) % 7  # three near ties flipped
    assert range_error(want, got) == (1.0, 3 / 200)  # by range it would be 1/6
    assert range_error(want, want.copy()) == (0.0, 0.0)
    assert range_error(want, got[:100]) == (np.inf, np.inf)
    mask = np.array([True, False, True, True])
    assert range_error(mask, ~mask)[1] == 1.0


def test_string_inputs_are_single_letters_and_strings_compare_equal_or_not() -> None:
    model = model_from_text(HEADER + " g (string[N] s) => (string[N] y) { y = Identity(s) }")
    a, b = random_inputs(model, 2)
    assert a["s"].dtype == object and a["s"].shape == (2,)
    assert all(isinstance(c, str) and len(c) == 1 and c.islower() for c in a["s"])
    assert range_error(a["s"], a["s"].copy()) == (0.0, 0.0)
    changed = a["s"].copy()
    changed[0] = changed[0] + "x"
    assert range_error(a["s"], changed) == (1.0, 1.0)


def test_random_inputs_differ_between_sets_and_repeat_with_the_seed() -> None:
    model = model_from_text(HEADER + " g (float[4] x) => (float[4] y) { y = Relu(x) }")
    a, b = random_inputs(model, 2)
    assert not np.array_equal(a["x"], b["x"])
    np.testing.assert_array_equal(random_inputs(model, 1)[0]["x"], a["x"])


def test_an_input_without_a_shape_cannot_be_made_up() -> None:
    model = model_from_text(HEADER + " g (float x) => (float y) { y = Relu(x) }")
    model.graph.inputs[0].type = None
    with pytest.raises(OnnxForgeError, match="'x' has no tensor shape"):
        random_inputs(model, 1)


def test_equal_models_have_no_differences(tmp_path: Path) -> None:
    body = " g (float[2, 3] x) => (float[2, 3] y) { y = Relu(x) }"
    a, b = _saved(tmp_path, "a.onnx", body), _saved(tmp_path, "b.onnx", body)
    feeds = random_inputs(model_from_text(HEADER + body), 3)
    assert compare_on_onnxruntime(a, b, feeds, ["y"]) == []


def test_a_changed_result_is_named_with_its_output_and_input_set(tmp_path: Path) -> None:
    a = _saved(tmp_path, "a.onnx", " g (float[2, 3] x) => (float[2, 3] y) { y = Relu(x) }")
    b = _saved(tmp_path, "b.onnx", " g (float[2, 3] x) => (float[2, 3] y) { y = Abs(x) }")
    feeds = random_inputs(
        model_from_text(HEADER + " g (float[2, 3] x) => (float[2, 3] y) {y = Relu(x)}"), 2
    )
    problems = compare_on_onnxruntime(a, b, feeds, ["y"])
    assert len(problems) == 2
    assert problems[0].startswith("input set 0, output 'y': ")
    assert "differ beyond rtol=0.0001, atol=1e-05, max abs difference" in problems[0]


def test_a_changed_shape_is_a_difference(tmp_path: Path) -> None:
    a = _saved(tmp_path, "a.onnx", " g (float[2, 3] x) => (float[2, 3] y) { y = Relu(x) }")
    b = _saved(
        tmp_path,
        "b.onnx",
        " g (float[2, 3] x) => (float[6] y) { s = Constant <value_ints = [6]> () "
        "r = Relu(x) y = Reshape(r, s) }",
    )
    feeds = [{"x": np.ones((2, 3), np.float32)}]
    assert compare_on_onnxruntime(a, b, feeds, ["y"]) == [
        "input set 0, output 'y': float32[6], the original gives float32[2, 3]"
    ]


def test_a_bounded_outputs_error_is_over_its_scale_where_that_is_wider() -> None:
    from onnxforge.api.compare import output_scales

    model = model_from_text(
        HEADER
        + """
        g (float[2, 3] x) => (float[3, 2] prob, float[2, 3] clipped, float[6, 2] both,
                              float[2, 3] plain) {
            s = Sigmoid(x)
            prob = Transpose<perm = [1, 0]>(s)
            lo = Constant<value = float {-6.0}>()
            hi = Constant<value = float {6.0}>()
            clipped = Clip(x, lo, hi)
            t = Transpose<perm = [1, 0]>(clipped)
            both = Concat<axis = 0>(prob, t)
            plain = Relu(x)
        }"""
    )
    assert output_scales(model) == {"prob": 1.0, "clipped": 12.0, "both": 12.0}
    # a detector's map on a random image: about 1e-7 everywhere, off by float16's 1e-7
    want = np.full((3, 2), 1e-7, np.float32)
    want[0, 0] = 2.5e-7
    got = want + np.float32(1e-7)
    assert range_error(want, got)[1] == pytest.approx(1e-7 / 1.5e-7, rel=1e-5)
    assert range_error(want, got, scale=1.0)[1] == pytest.approx(1e-7, rel=1e-5)
    # a range wider than the scale is kept; the slow path (float64) agrees with the fast one
    wide = np.linspace(-3, 3, 6).reshape(3, 2)
    assert range_error(wide, wide + 0.06, scale=1.0)[1] == pytest.approx(0.01)
    assert range_error(wide.astype(np.float32), wide.astype(np.float32) + np.float32(0.06),
                       scale=1.0)[1] == pytest.approx(0.01, rel=1e-5)  # fmt: skip


def test_a_split_of_boxes_and_sigmoid_scores_bounds_the_scores_part() -> None:
    """A YOLO head concatenates its boxes (unbounded) and Sigmoid scores, transposes and
    splits them again: the scores part is bounded by the Sigmoid, the boxes part is not."""
    from onnxforge.api.compare import output_scales
    from onnxforge.shape_infer import infer

    model = model_from_text(
        HEADER
        + """
        g (float[1, 4, 50] boxes, float[1, 3, 50] logits) => (float[1, 50, 4] b,
                                                              float[1, 50, 3] scores) {
            s = Sigmoid(logits)
            both = Concat<axis = 1>(boxes, s)
            t = Transpose<perm = [0, 2, 1]>(both)
            sizes = Constant<value = int64[2] {4, 3}>()
            b, scores = Split<axis = -1>(t, sizes)
        }"""
    )
    infer(model, verify=False)
    assert output_scales(model) == {"scores": 1.0}
    assert output_scales(model, also=["s", "t"]) == {"scores": 1.0, "s": 1.0}


def test_a_dim_the_weights_fix_takes_their_size() -> None:
    """madmom's [frames, features] input: the feature count is the first LSTM's input_size
    (138); at 5 the model does not run. The same for a Conv's channels and a MatMul's inner
    dim, named or not."""
    lstm = model_from_text(
        HEADER + " g (float[T, F] x) => (float[T, 1, 1, 2] y) {"
        " axes = Constant<value = int64[1] {1}>()  u = Unsqueeze(x, axes)"
        " y, h, c = LSTM<hidden_size = 2>(u, w, r) }",
        w=np.ones((1, 8, 7), np.float32),
        r=np.ones((1, 8, 2), np.float32),
    )
    a, b = random_inputs(lstm, 2)
    assert a["x"].shape == b["x"].shape == (2, 7)
    conv = model_from_text(
        HEADER + " g (float[N, C, H, W] x) => (float[N, 2, H, W] y) { y = Conv(x, w) }",
        w=np.ones((2, 6, 1, 1), np.float32),
    )
    assert random_inputs(conv, 1)[0]["x"].shape == (1, 6, 64, 64)
    unnamed = model_from_text(
        HEADER + " g (float[N, K] x) => (float[N, 3] y) { y = MatMul(x, w) }",
        w=np.ones((9, 3), np.float32),
    )
    unnamed.graph.inputs[0].type = TensorType(DType.FLOAT, ("N", None))  # an unnamed dim
    assert random_inputs(unnamed, 1)[0]["x"].shape == (2, 9)
    relu = model_from_text(HEADER + " g (float[N, K] x) => (float[N, K] y) { y = Relu(x) }")
    assert random_inputs(relu, 1)[0]["x"].shape == (2, 5)  # nothing fixes them


def test_unknown_dims_take_the_given_sizes_in_turn() -> None:
    """The calibration's sets alternate two sizes: a float16 op's error depends on them
    (ch_PP-OCRv2_rec, calibrated at 64 x 64 only, was 1.2e-2 off at 32 x 32)."""
    model = model_from_text(
        HEADER + " g (float[N, 3, H, W] x, float[T, N, F] s) => (float[N, 2, H, W] y)"
        " { y = Conv(x, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    sizes = (InputSizes(), InputSizes(side=32, first=16, other=8))
    sets = random_inputs(model, 3, sizes=sizes)
    assert [f["x"].shape for f in sets] == [(1, 3, 64, 64), (1, 3, 32, 32), (1, 3, 64, 64)]
    assert [f["s"].shape for f in sets] == [(2, 1, 5), (16, 1, 8), (2, 1, 5)]  # N is 1
    fixed = model_from_text(
        HEADER + " g (float[N, 3, 16, 16] x) => (float[N, 2, 16, 16] y) { y = Conv(x, w) }",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    assert {f["x"].shape for f in random_inputs(fixed, 2, sizes=sizes)} == {(1, 3, 16, 16)}


@pytest.mark.parametrize(
    ("declared", "dtype", "low", "high"),
    [("float[N, 3, H, W]", np.float32, -2.0, 2.0), ("uint8[N, H, W, 3]", np.uint8, 0, 255)],
)
def test_a_scene_is_flat_rectangles_on_a_flat_background_within_the_inputs_range(
    declared: str, dtype: type, low: float, high: float
) -> None:
    """Noise keeps a detector's map saturated where a real image does not: a scene is flat
    regions with edges between them, in either layout; a set without ``scene`` is noise."""
    body = (
        "y = Conv(x, w)"
        if dtype == np.float32
        else "f = Cast<to = 1>(x)  t = Transpose<perm = [0, 3, 1, 2]>(f)  y = Conv(t, w)"
    )
    model = model_from_text(
        HEADER + f" g ({declared} x) => (float[N, 2, H, W] y) {{ {body} }}",
        w=np.ones((2, 3, 1, 1), np.float32),
    )
    scene, noise = random_inputs(model, 2, sizes=(InputSizes(scene=True), InputSizes()))
    image = scene["x"] if dtype == np.uint8 else scene["x"].transpose(0, 2, 3, 1)
    assert image.shape == (1, 64, 64, 3) and image.dtype == dtype
    assert low <= image.min() and image.max() <= high
    colors = {tuple(p) for p in image.reshape(-1, 3)}
    assert 2 <= len(colors) <= 60  # a background and at most 59 rectangles
    across = np.mean(np.all(image[:, :, 1:] == image[:, :, :-1], axis=-1))
    assert across > 0.8  # flat but at the edges
    pixels = noise["x"] if dtype == np.uint8 else noise["x"].transpose(0, 2, 3, 1)
    assert len({tuple(p) for p in pixels.reshape(-1, 3)}) > 4000  # noise: nearly all differ


def test_scene_sets_of_a_model_without_an_image_input_are_noise() -> None:
    model = model_from_text(HEADER + " g (float[N, K] x) => (float[N, K] y) { y = Relu(x) }")
    scene = random_inputs(model, 2, sizes=(InputSizes(scene=True),))
    noise = random_inputs(model, 2, sizes=(InputSizes(),))
    for a, b in zip(scene, noise, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"])


def test_saturating_outputs_are_found_through_moves_and_not_through_arithmetic() -> None:
    model = model_from_text(
        HEADER + " g (float[N, 4] x) => (float[4, N] q, float[N, 4] r, float[N, 4] s,"
        " float[N, 4] p) {"
        " z = Relu(x)  sg = Sigmoid(z)  q = Transpose(sg)  t = Sigmoid(z)  r = Mul(t, t)"
        " s = Sigmoid(x)  p = Softmax<axis = 1>(z) }"
    )
    # r is arithmetic on a Sigmoid; s reads a graph input, which nothing rounds but the
    # input's own cast; a Softmax's margin on random logits of hundreds is no measure
    assert saturating_inputs(model) == {"z": Saturating("q")}


def test_close_calls_are_the_softmax_outputs_found_through_moves() -> None:
    model = model_from_text(
        HEADER + " g (float[N, 4] x) => (float[4, N] q, float[N, 4] r, float[N, 4] s) {"
        " z = Relu(x)  p = Softmax<axis = 1>(z)  q = Transpose(p)"
        " e = Softmax(z)  r = Mul(e, e)  s = Softmax(x) }"
    )
    assert close_call_inputs(model) == {"z": CloseCall("q", 1, flattened=False)}
    old = model_from_text(
        '<ir_version: 7, opset_import: ["" : 11]>'
        " g (float[N, 4] x) => (float[N, 4] p) { z = Relu(x)  p = Softmax(z) }"
    )
    assert close_call_inputs(old) == {"z": CloseCall("p", 1, flattened=True)}


def test_close_call_error_reads_the_nearest_two_classes_at_a_quarter() -> None:
    """The row whose two largest logits are nearest is read: its two classes' error
    difference over 4; a saturated row's large errors are not."""
    want = np.array([[100.0, -50.0, 0.0], [3.0, 2.5, -7.0]], np.float32)
    got = want + np.array([[9.0, -9.0, 9.0], [0.1, -0.1, 5.0]], np.float32)
    across = CloseCall("p", -1, flattened=False)
    assert close_call_error(want, got, across) == pytest.approx(0.05)  # (0.1 + 0.1) / 4
    down = CloseCall("p", 0, flattened=False)  # classes down the first axis: 3 rows of 2
    assert close_call_error(want, got, down) == pytest.approx((9.0 - 5.0) / 4)  # 0 and -7
    assert close_call_error(want, got[:1], across) == np.inf
    cube = np.stack([want, want])  # before version 13: 2 rows of 6, every dim from axis 1
    flat = CloseCall("p", 1, flattened=True)
    assert close_call_error(cube, np.stack([got, got]), flat) == pytest.approx((9 - 0.1) / 4)


def test_middle_error_reads_the_least_saturated_elements_at_a_quarter() -> None:
    want = np.array([-40.0, -30.0, 2.0, 35.0, np.inf], np.float32)
    got = want + np.array([4.0, 4.0, 0.2, -4.0, 0.0], np.float32)
    sigmoid = Saturating("p")
    assert middle_error(want, got, sigmoid) == pytest.approx(0.05)  # the 2.0's 0.2 / 4
    many = np.linspace(-50, 50, 1000)  # the 10 nearest 0 are read
    moved = many + np.where(np.abs(many) < 0.5, 0.08, 3.0)
    assert middle_error(many, moved, sigmoid) == pytest.approx(0.02)
    assert middle_error(want, want[:2], sigmoid) == np.inf
    assert middle_error(want[:4], want[:4] + np.array([0, 0, np.nan, 0]), sigmoid) == np.inf
