"""Reshape targets with symbolic elements: a symbol that may be 0 copies the input's dim."""

from __future__ import annotations

from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import is_unknown_symbol
from onnxforge.testing import model_from_text

HEADER = '<ir_version: 8, opset_import: ["" : 18]>'


def _output_shape(text: str) -> tuple:
    model = model_from_text(HEADER + text)
    report = infer(model)
    assert not report.errors, report.errors
    t = model.graph.outputs[0].type
    assert isinstance(t, TensorType) and t.shape is not None
    return t.shape


def test_reshape_to_a_symbol_that_may_be_0_elsewhere_is_not_written_as_that_symbol() -> None:
    # Boundary fuzz: Reshape([1, N], [N, 0]) was written [N, N]; at N=0 the 0-valued N copies
    # dim 0 (1), and onnxruntime gives [1, 0].
    shape = _output_shape("""
    g (float[N] x) => (float[?, ?] y) {
        zero = Constant <value = int64[1] {0}> ()
        u = Unsqueeze(x, zero)
        s = Shape(x)
        n = Gather <axis = 0> (s, zero)
        target = Concat <axis = 0> (n, zero)
        y = Reshape(u, target)
    }""")
    assert is_unknown_symbol(shape[0]) and shape[1] == "N"


def test_reshape_to_the_same_symbol_at_the_same_place_keeps_it() -> None:
    shape = _output_shape("""
    g (float[B, 3, 4] x) => (float[?, ?] y) {
        zero = Constant <value = int64[1] {0}> ()
        s = Shape(x)
        b = Gather <axis = 0> (s, zero)
        twelve = Constant <value = int64[1] {12}> ()
        target = Concat <axis = 0> (b, twelve)
        y = Reshape(x, target)
    }""")
    assert shape == ("B", 12)


def test_reshape_flattening_two_symbols_keeps_their_product() -> None:
    # B*S at dim 0 of a [B, S, 8] input: at S=0, B=3 a copy (3) would give 24 elements of an
    # empty input, an invalid model; everywhere valid the dim is B*S.
    shape = _output_shape("""
    g (float[B, S, 8] x) => (float[?, ?] y) {
        s = Shape(x)
        i0 = Constant <value = int64[1] {0}> ()
        i1 = Constant <value = int64[1] {1}> ()
        b = Gather <axis = 0> (s, i0)
        n = Gather <axis = 0> (s, i1)
        bs = Mul(b, n)
        h = Constant <value = int64[1] {8}> ()
        target = Concat <axis = 0> (bs, h)
        y = Reshape(x, target)
    }""")
    assert shape == ("B*S", 8)


def test_reshape_to_a_symbol_minus_one_is_unknown_because_it_may_be_minus_one() -> None:
    shape = _output_shape("""
    g (float[N, 4] x) => (float[?, ?] y) {
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64[1] {1}> ()
        s = Shape(x)
        n = Gather <axis = 0> (s, zero)
        m = Sub(n, one)
        four = Constant <value = int64[1] {4}> ()
        target = Concat <axis = 0> (m, four)
        y = Reshape(x, target)
    }""")
    assert is_unknown_symbol(shape[0]) and shape[1] == 4


def test_a_minus_one_over_a_constant_is_the_quotient_the_run_needs() -> None:
    # madmom's CNNs: [T, 24, F] to [-1, 2520] runs only where 105 divides F*T.
    shape = _output_shape("""
    g (float[T, 24, F] x) => (float[?, ?] y) {
        s = Constant <value = int64[2] {-1, 2520}> ()
        y = Reshape(x, s)
    }""")
    assert shape == ("floor((F*T)/105)", 2520)


def test_a_minus_one_over_a_constant_times_a_factor_is_the_quotient() -> None:
    # trueocr's detector: [1, 4, h, 1, w] to [0, 0, -1, 2, 0]: -1 is 4*h*w / (8*w).
    shape = _output_shape("""
    g (float[1, 4, h, 1, w] x) => (float[?, ?, ?, ?, ?] y) {
        s = Constant <value = int64[5] {0, 0, -1, 2, 0}> ()
        y = Reshape(x, s)
    }""")
    assert shape == (1, 4, "floor(h/2)", 2, "w")


def test_minus_one_quotients_are_what_onnxruntime_computes() -> None:
    import numpy as np
    import pytest

    ort = pytest.importorskip("onnxruntime")
    from onnxforge import io
    from onnxforge.shape_infer.symbolic import evaluate

    model = model_from_text(
        HEADER
        + """
    g (float[T, 24, F] x, float[1, 4, h, 1, w] z) => (float[?, ?] y, float[?, ?, ?, ?, ?] v) {
        s = Constant <value = int64[2] {-1, 2520}> ()
        y = Reshape(x, s)
        t = Constant <value = int64[5] {0, 0, -1, 2, 0}> ()
        v = Reshape(z, t)
    }"""
    )
    proto = io.to_proto(model)
    infer(model)
    session = ort.InferenceSession(proto.SerializeToString())
    for binding in ({"T": 35, "F": 3, "h": 4, "w": 3}, {"T": 7, "F": 30, "h": 10, "w": 1}):
        feeds = {
            "x": np.zeros((binding["T"], 24, binding["F"]), np.float32),
            "z": np.zeros((1, 4, binding["h"], 1, binding["w"]), np.float32),
        }
        for value, array in zip(model.graph.outputs, session.run(None, feeds), strict=True):
            assert [evaluate(d, binding) for d in value.type.shape] == list(array.shape)


def test_a_target_dim_that_is_a_constant_times_the_copied_dim_is_kept() -> None:
    # tf2onnx's BERT (g2p-id): ReduceProd of Shape(x)[0:2] is 8*B; where it is 0, B is 0 and
    # the copy it would make is 0 too, so 8*B is exact and the -1 resolves to 32.
    shape = _output_shape("""
    g (float[B, 8, 1, 32, 16] x) => (float[?, ?, ?] y) {
        s = Shape(x)
        i = Constant <value = int64[2] {0, 1}> ()
        g1 = Gather <axis = 0> (s, i)
        p = ReduceProd <keepdims = 1> (g1)
        m1 = Constant <value = int64[1] {-1}> ()
        j = Constant <value = int64[1] {4}> ()
        g2 = Gather <axis = 0> (s, j)
        c = Concat <axis = 0> (p, m1, g2)
        y = Reshape(x, c)
    }""")
    assert shape == ("8*B", 32, 16)


def test_a_dim_a_conv_produced_is_at_least_one_so_a_reshape_keeps_it() -> None:
    # SVTRv2 (azcrawlerpy, wild corpus) reshapes its conv features [B, H', W', C] to
    # [-1, W', C]: W' = floor((W+3)/4) could be 0 and copy H' there, but onnxruntime's Conv
    # refuses an empty map, so W' >= 1 in every run and the -1 is B*H'.
    shape = _output_shape("""
    g (float[B, 3, H, W] x, float[8, 3, 3, 3] w) => (float[?, ?, ?] y) {
        c = Conv <strides = [4, 4], pads = [1, 1, 1, 1]> (x, w)
        t = Transpose <perm = [0, 2, 3, 1]> (c)
        s = Shape(t)
        two = Constant <value = int64[1] {2}> ()
        d = Gather <axis = 0> (s, two)
        m1 = Constant <value = int64[1] {-1}> ()
        eight = Constant <value = int64[1] {8}> ()
        target = Concat <axis = 0> (m1, d, eight)
        y = Reshape(t, target)
    }""")
    assert shape == ("B*floor((H+3)/4)", "floor((W+3)/4)", 8)


def test_the_dims_beside_a_minus_one_are_at_least_one_for_later_reshapes() -> None:
    # GPT-2 splits heads with [B, S, -1, 8] (onnxruntime refuses a -1 beside dims that
    # multiply to 0), so S >= 1 in every run and [B*S, 32] -> [B, S, 32] keeps S, which a 0
    # would otherwise have turned into a copy of the 32.
    shape = _output_shape("""
    g (float[B, S, 32] x) => (float[?, ?, ?] y) {
        s = Shape(x)
        i = Constant <value = int64[2] {0, 1}> ()
        bs = Gather <axis = 0> (s, i)
        tail = Constant <value = int64[2] {-1, 8}> ()
        split = Concat <axis = 0> (bs, tail)
        heads = Reshape(x, split)
        flat = Constant <value = int64[2] {-1, 32}> ()
        f = Reshape(heads, flat)
        last = Constant <value = int64[1] {32}> ()
        back = Concat <axis = 0> (bs, last)
        y = Reshape(f, back)
    }""")
    assert shape == ("B", "S", 32)
