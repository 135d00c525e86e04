"""Expand's target shape: broadcast with the input, never a negative dim."""

from __future__ import annotations

from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate
from onnxforge.testing import model_from_text


def test_expand_to_a_negative_dim_is_an_error_not_a_negative_dim() -> None:
    # boundary fuzz: Expand of float[N] to [-1] was written float[-1]
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N] x) => (float[?] y) {
        shape = Constant <value = int64[1] {-1}> ()
        y = Expand(x, shape)
    }""")
    report = infer(model)
    assert [e.reason for e in report.errors] == ["shape [-1] has a negative dim"]


def test_expand_to_a_symbol_one_more_than_the_dim_is_exact_not_assumed_equal() -> None:
    # boundary fuzz: Expand of [N,1] to [N+1,1] was written [N,1] under "assumed: N == N+1";
    # onnxruntime runs it at N=1 (giving 2) and N=0 (giving 0), as min(N*(N+1), N+1) says
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N, 1] x) => (float[?, ?] y) {
        s = Shape(x)
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64[1] {1}> ()
        n = Gather <axis = 0> (s, zero)
        n1 = Add(n, one)
        shape = Concat <axis = 0> (n1, one)
        y = Expand(x, shape)
    }""")
    report = infer(model)
    assert not report.errors and not report.assumptions
    t = model.graph.outputs[0].type
    assert isinstance(t, TensorType) and t.shape is not None
    assert t.shape[1] == 1
    assert [evaluate(t.shape[0], {"N": n}) for n in (0, 1)] == [0, 2]
