"""Passes that find nothing to do share one inference; any change makes the next pass infer
again (passes/_rewrite.inferred_types)."""

from __future__ import annotations

import pytest

import onnxforge.passes._rewrite as rewrite
from onnxforge.passes import EliminateIdentityPass, FuseBiasAddPass, FuseMatMulAddPass
from onnxforge.testing import model_from_text

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) { r = Relu(x) y = Neg(r) }"""


@pytest.fixture
def inferences(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = rewrite.infer

    def counting(model, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(model, **kw)

    monkeypatch.setattr(rewrite, "infer", counting)
    return calls


def test_passes_with_nothing_to_do_infer_once(inferences: list[int]) -> None:
    model = model_from_text(MODEL)
    for p in (EliminateIdentityPass(), FuseBiasAddPass(), FuseMatMulAddPass()):
        assert not p(model).modified
    assert len(inferences) == 1
    assert model.graph.ops[0]._outputs[0].type is None  # declared types came back


def test_a_change_makes_the_next_pass_infer_again(inferences: list[int]) -> None:
    model = model_from_text(MODEL.replace("r = Relu(x)", "i = Identity(x) r = Relu(i)"))
    assert EliminateIdentityPass()(model).modified
    FuseBiasAddPass()(model)
    assert len(inferences) == 2
    neg = model.graph.ops[-1]
    # an edit outside any pass changes the graph's size: inferred again
    model.graph.add_op("Relu", [model.graph.inputs[0]])
    FuseMatMulAddPass()(model)
    assert len(inferences) == 3
    assert neg.op_type == "Neg"
