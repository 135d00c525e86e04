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
