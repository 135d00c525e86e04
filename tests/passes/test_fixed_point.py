"""FixedPoint repeats passes until nothing changes (or the cap), and cleanup_passes() is a
pipeline that reaches its fixed point on a model where each pass feeds the next."""

from __future__ import annotations

from typing import ClassVar

import pytest

from onnxforge.errors import OnnxForgeError, PassError
from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import (
    EliminateDeadCodePass,
    FixedPoint,
    Pass,
    PassManager,
    PassResult,
    cleanup_passes,
)
from onnxforge.testing import assert_models_close, model_from_text


class _Countdown(Pass):
    """Changes the model (in its imagination) ``times`` times, then reports no change."""

    name: ClassVar[str] = "countdown"

    def __init__(self, times: int) -> None:
        self.times = times

    def call(self, model: Model) -> PassResult:
        result = PassResult(model, modified=self.times > 0)
        if self.times > 0:
            result.note("ticks", "t")
            self.times -= 1
        return result


class _Broken(Pass):
    name: ClassVar[str] = "broken"

    def call(self, model: Model) -> PassResult:
        raise OnnxForgeError("no luck")


def _model() -> Model:
    return model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x) }'
    )


def test_passes_repeat_until_none_changes_the_model() -> None:
    result = FixedPoint([_Countdown(3), EliminateDeadCodePass()])(_model())
    assert result.modified
    assert result.stats == {"iterations": 4, "countdown.ticks": 3}


def test_the_iteration_cap_stops_a_pass_that_always_changes() -> None:
    result = FixedPoint([_Countdown(100)], max_iterations=5)(_model())
    assert result.stats == {"iterations": 5, "countdown.ticks": 5}


def test_a_failure_names_the_pass_and_the_iteration() -> None:
    with pytest.raises(PassError, match=r"pass fixed-point: pass broken \(iteration 1\): no luck"):
        PassManager([FixedPoint([_Countdown(0), _Broken()])]).run(_model())


def test_cleanup_passes_end_with_dead_code_elimination() -> None:
    names = [p.name for p in cleanup_passes()]
    assert names[-1] == "eliminate-dead-code"
    assert len(set(names)) == len(names) == 11


def test_cleanup_reaches_a_fixed_point_where_each_pass_feeds_the_next() -> None:
    # Identity hides the Transpose pair; cancelling it exposes two equal Relus and a no-op
    # Reshape; merging them leaves dead code.
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (float[N, 3] x) => (float[N, 3] y) {
        a = Transpose <perm = [1, 0]> (x)
        b = Identity(a)
        c = Transpose <perm = [1, 0]> (b)
        d = Relu(c)
        e = Relu(x)
        s = Shape(e)
        f = Reshape(d, s)
        y = Add(f, e)
    }"""
    )
    before = to_proto(model)
    report = PassManager([FixedPoint(cleanup_passes())], verify_each=True).run(model)
    verify(model)
    assert [op.op_type for op in model.graph.ops] == ["Relu", "Add"]
    stats = report.rows[0].stats
    assert stats["iterations"] >= 2
    assert stats["eliminate-common-subexpressions.ops_merged"] == 1
    assert_models_close(before, model)


class _RemoveOneRelu(Pass):
    """Removes one Relu per run (none left: no change)."""

    name: ClassVar[str] = "remove-one-relu"

    def call(self, model: Model) -> PassResult:
        graph = model.graph
        for op in graph.ops:
            if op.op_type == "Relu":
                (x,) = graph.inputs_of(op)
                (y,) = graph.outputs_of(op)
                if x is None or y is None or y in graph.outputs:
                    continue
                graph.replace_all_uses(y, x)
                graph.remove_op(op)
                return PassResult(model, modified=True)
        return PassResult(model)


def test_an_inner_row_counts_only_its_own_passs_effect_on_the_nodes() -> None:
    """Issue 15: a pass that changed nothing shows the same count before and after, though
    the passes after it in the rounds removed nodes."""
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) '
        "{ a = Relu(x) b = Relu(a) c = Relu(b) y = Relu(c) }"
    )
    report = PassManager([FixedPoint([_Countdown(0), _RemoveOneRelu()])]).run(model)
    fixed, idle, remover = report.rows
    assert (fixed.ops_before, fixed.ops_after) == (4, 1)
    assert idle.pass_name == "  countdown" and (idle.ops_before, idle.ops_after) == (4, 4)
    assert (remover.ops_before, remover.ops_after) == (4, 1)
