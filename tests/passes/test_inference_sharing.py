"""Passes that find nothing to do share one inference, and so do passes after one that only
removed or merged ops; any other change makes the next pass infer again
(passes/_rewrite.inferred_types, Pass.keeps_types)."""

from __future__ import annotations

import gc
import weakref

import pytest

import onnxforge.passes._rewrite as rewrite
from onnxforge import io
from onnxforge.passes import (
    EliminateCommonSubexpressionsPass,
    EliminateDeadCodePass,
    EliminateIdentityPass,
    FuseBiasAddPass,
    FuseMatMulAddPass,
    RemoveDefaultInputsPass,
    SimplifyShapeOpsPass,
)
from onnxforge.passes._infra import note_change
from onnxforge.shape_infer import Resumable, infer
from onnxforge.testing import model_from_text

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) { r = Relu(x) y = Neg(r) }"""


@pytest.fixture
def inferences(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per inference of a whole model (``again`` counts the others)."""
    calls: list[int] = []
    real = rewrite.infer_resumable

    def counting(model, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(model, **kw)

    monkeypatch.setattr(rewrite, "infer_resumable", counting)
    return calls


@pytest.fixture
def again(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per inference brought up to date (``Resumable.again``): ops inferred again."""
    calls: list[int] = []
    real = Resumable.again

    def counting(self, **kw):  # type: ignore[no-untyped-def]
        before = self.inferred_again
        report = real(self, **kw)
        calls.append(self.inferred_again - before if report is not None else -1)
        return report

    monkeypatch.setattr(Resumable, "again", counting)
    return calls


def test_passes_with_nothing_to_do_infer_once(inferences: list[int], again: list[int]) -> None:
    model = model_from_text(MODEL)
    for p in (EliminateIdentityPass(), FuseBiasAddPass(), FuseMatMulAddPass()):
        assert not p(model).modified
    assert len(inferences) == 1 and again == []
    assert model.graph.ops[0]._outputs[0].type is None  # declared types came back


def test_a_change_makes_the_next_pass_infer_what_it_touched(
    inferences: list[int], again: list[int]
) -> None:
    """Two Transposes that undo each other go; the next pass infers the Relu that reads x
    now and the first Transpose, which lost its reader (their types are the same, so nothing
    after them), not the model. An edit by Graph's methods outside any pass is stamped too."""
    model = model_from_text(
        MODEL.replace(
            "r = Relu(x)",
            "t = Transpose<perm=[1, 0]>(x) u = Transpose<perm=[1, 0]>(t) r = Relu(u)",
        )
    )
    assert SimplifyShapeOpsPass()(model).modified
    FuseBiasAddPass()(model)
    assert len(inferences) == 1 and again == [2]
    neg = model.graph.ops[-1]
    added = model.graph.add_op("Relu", [model.graph.inputs[0]])
    FuseMatMulAddPass()(model)
    assert len(inferences) == 1 and again == [2, 1]
    assert neg.op_type == "Neg"
    with rewrite.inferred_types(model):
        assert added._outputs[0].type.shape == ("N", 4)
        seen = {v.name: v.type for v in model.graph.values()}
    fresh = io.from_proto(io.to_proto(model))
    assert not infer(fresh).errors
    assert seen == {v.name: v.type for v in fresh.graph.values()}


def test_a_pass_that_is_not_journaled_makes_the_next_pass_infer_the_model(
    inferences: list[int], again: list[int]
) -> None:
    model = model_from_text(MODEL)
    rewrite.inference(model)
    note_change()  # what a pass whose edits leave no stamp reports
    rewrite.inference(model)
    assert len(inferences) == 2 and again == []


CARRIED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y, float[N, 4] z) {
    i = Identity(x) a = Relu(i) b = Relu(i) dead = Exp(a) n = Neg(a)
    y = Add(n, b) z = Sigmoid(b)
}"""


def test_removing_or_merging_ops_keeps_the_inference_and_its_types_are_a_fresh_one(
    inferences: list[int],
) -> None:
    """Identity, a duplicate Relu and a dead Exp go, each pass reporting the change, and the
    next pass reads types without inferring again: those a fresh inference of the result
    gives, value for value."""
    model = model_from_text(CARRIED)
    for p in (EliminateIdentityPass(), EliminateCommonSubexpressionsPass()):
        assert p(model).modified
    assert EliminateDeadCodePass()(model).modified
    assert [op.op_type for op in model.graph.ops] == ["Relu", "Neg", "Add", "Sigmoid"]
    carried = rewrite.inference(model)
    assert len(inferences) == 1
    seen = {v.name: v.type for v in model.graph.values()}
    fresh = io.from_proto(io.to_proto(model))
    assert not infer(fresh).errors
    assert seen == {v.name: v.type for v in fresh.graph.values()}
    assert carried.errors == []
    FuseBiasAddPass()(model)
    assert len(inferences) == 1


def test_an_omitted_default_input_keeps_the_inference(inferences: list[int]) -> None:
    """A zero Conv bias goes (remove-default-inputs): the Conv's output type does not depend
    on it, so the types are a fresh inference's without inferring again."""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 1, 4, 4] x) => (float[N, 2, 4, 4] y)
        <float[2, 1, 1, 1] w = {1.0, 2.0}, float[2] b = {0.0, 0.0}> {
            c = Conv(x, w, b) y = Relu(c)
        }"""
    )
    rewrite.inference(model)
    assert RemoveDefaultInputsPass()(model).modified
    assert len(model.graph.ops[0]._inputs) == 2
    rewrite.inference(model)
    assert len(inferences) == 1
    seen = {v.name: v.type for v in model.graph.values()}
    fresh = io.from_proto(io.to_proto(model))
    assert not infer(fresh).errors
    assert seen == {v.name: v.type for v in fresh.graph.values()}


def test_a_model_passes_ran_on_is_freed_with_its_inference() -> None:
    """The inference kept for the next pass refers back to the model (its engine), so it is
    held by the model: a table weakly keyed by the model never let one go, and a calibration
    that converts a copy each round grew by a copy a round (a ViT's: 230 MB, past 8 GiB)."""
    model = model_from_text(CARRIED)
    assert EliminateIdentityPass()(model).modified
    rewrite.inference(model)
    assert model._inference is not None
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
