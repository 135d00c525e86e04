"""A fixed point whose later rounds visit only what changed (``_worklist.visit``) ends with
the model that visiting every op every round ends with: the same bytes and the same number of
rounds, on the exporter fixtures, onnx's zoo models, the scale benchmark's graphs, cases with
bodies and local functions, random fuzz graphs and the exported models of
ONNXFORGE_EXPORT_DIR when set. The worklist is forced on every later round (no fall back to
visiting all when many ops were touched).

On these models a later round seldom finds anything, and when it does the touched ops alone
lead to it: leaving out every neighbour changes no output here, 3,000 fuzz graphs included.
So what each pass counts as near a touched op, the journal, and the touches inference and
edits add are checked directly below; each of those tests fails when its piece is taken out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, note, settings

from onnxforge import io, ir
from onnxforge.api._optimize import OptimizeOptions, optimize_model
from onnxforge.ir import Model, constant_tensor
from onnxforge.passes import _infra, _worklist
from onnxforge.passes import _rewrite as rewrite
from onnxforge.passes import eliminate_common_subexpressions as cse
from onnxforge.passes import merge_parallel_matmuls as merge
from onnxforge.passes import simplify_shape_ops as simplify
from onnxforge.passes import sink_shape_ops as sink
from onnxforge.testing import model_from_text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import scale_graphs  # noqa: E402
from edit_cases import EDIT_CASES  # noqa: E402
from real_models import exported_models  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "data" / "exporters").rglob("*.onnx"))
ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

CASES = {
    # A Transpose read by two equal Relus, each undone by a Transpose: sinking, duplicates.
    "sink_after_cse": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 3] y) {
        t = Transpose<perm=[1, 0]>(x) a = Relu(t) b = Relu(t)
        u = Transpose<perm=[1, 0]>(a) v = Transpose<perm=[1, 0]>(b) y = Add(u, v)
    }""",
    # Two chains that are duplicates once the Identity goes: CSE merges them op after op.
    "cse_cascade": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 4] y) {
        i = Identity(x) a1 = Relu(x) a2 = Relu(i) b1 = Neg(a1) b2 = Neg(a2)
        c1 = Abs(b1) c2 = Abs(b2) y = Add(c1, c2)
    }""",
    # Two MatMuls of one input whose weights are constants, one behind an Identity.
    "owned_after_dce": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 3] y, float[N, 3] z) {
        w1 = Constant<value = float[4, 3] {1,2,3,4,5,6,7,8,9,10,11,12}>()
        w2 = Constant<value = float[4, 3] {1,0,1,0,1,0,1,0,1,0,1,0}>()
        i = Identity(w2) y = MatMul(x, w1) z = MatMul(x, i)
    }""",
    # Two Slices of one shape that are equal once the index arithmetic is folded.
    "same_known_later": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 4] y) {
        s = Shape(x) one = Constant<value = int64[1] {1}>() two = Constant<value = int64[1] {2}>()
        k = Sub(two, one) z = Constant<value = int64[1] {0}>() g1 = Slice(s, z, one)
        g2 = Slice(s, z, k) c = Concat<axis=0>(g2, g1) r = Reshape(x, s) y = Relu(r)
    }""",
    **EDIT_CASES,
}


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Later rounds visit by the worklist however many ops were touched."""
    monkeypatch.setattr(_worklist, "SWEEP_SHARE", 0)


def _optimized(model: Model, worklist: bool, pin_defaults: bool) -> tuple[bytes, list[int]]:
    real = _infra.FixedPoint.__init__

    def init(self: _infra.FixedPoint, *args: Any, **kw: Any) -> None:
        real(self, *args, **{**kw, "worklist": worklist})

    _infra.FixedPoint.__init__ = init  # type: ignore[method-assign]
    try:
        report = optimize_model(model, OptimizeOptions(pin_defaults=pin_defaults))
    finally:
        _infra.FixedPoint.__init__ = real  # type: ignore[method-assign]
    ir.verify(model)
    rounds = [r.stats.get("iterations", 0) for r in report.rows if r.pass_name == "fixed-point"]
    return io.to_proto(model).SerializeToString(), rounds


def _same_either_way(load: Any, *, pin_defaults: bool = False) -> None:
    swept = _optimized(load(), False, pin_defaults)
    visited = _optimized(load(), True, pin_defaults)
    assert visited[1] == swept[1], "the same number of rounds"
    if visited[0] != swept[0]:
        a = onnx.printer.to_text(onnx.load_from_string(swept[0]))
        b = onnx.printer.to_text(onnx.load_from_string(visited[0]))
        assert b == a
        pytest.fail("the same text but different bytes")


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.relative_to(ROOT / "tests").as_posix())
def test_exporter_fixtures(path: Path, forced: None) -> None:
    _same_either_way(lambda: io.load(path))


@pytest.mark.parametrize("name", sorted(p.name for p in ZOO.glob("*.onnx")))
def test_zoo(name: str, forced: None) -> None:
    _same_either_way(lambda: io.load(ZOO / name), pin_defaults=True)


@pytest.mark.parametrize("family", sorted(scale_graphs.FAMILIES))
def test_scale_graphs(family: str, forced: None) -> None:
    _same_either_way(lambda: io.from_proto(scale_graphs.FAMILIES[family](2000)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases(name: str, forced: None) -> None:
    _same_either_way(lambda: model_from_text(CASES[name]))


EXPORTS = exported_models(50 << 20)


@pytest.mark.skipif(not EXPORTS, reason="ONNXFORGE_EXPORT_DIR is unset or holds no model")
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_exported(path: Path, forced: None) -> None:
    _same_either_way(lambda: io.load(path))


def _fuzz_models() -> Any:
    pytest.importorskip("onnxruntime")  # the fuzz module asks it for the newest opset
    from hostile.test_fuzz import models

    return models()


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(drawn=_fuzz_models())
def test_fuzz_graphs(drawn: tuple[onnx.ModelProto, bool], forced: None) -> None:
    proto, _ = drawn
    note(onnx.printer.to_text(proto))
    _same_either_way(lambda: io.from_proto(proto))


# -- the worklist itself ----------------------------------------------------------------------
CHAIN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    a = Relu(x) b = Neg(a) c = Abs(b) d = Relu(c) e = Neg(d) f = Abs(e) y = Relu(f)
}"""


def _ops(model: Model) -> dict[str, ir.Op]:
    return {op._outputs[0].name: op for op in model.graph.ops}  # type: ignore[union-attr]


def test_without_a_mark_every_op_is_visited_in_topological_order() -> None:
    model = model_from_text(CHAIN)
    graph = model.graph
    assert list(_worklist.visit(graph, None)) == graph.topo_order()
    assert list(_worklist.visit(graph, None, reverse=True)) == graph.topo_order()[::-1]


def test_with_a_mark_only_touched_ops_and_their_neighbours_are_visited(forced: None) -> None:
    model = model_from_text(CHAIN)
    graph, ops = model.graph, _ops(model)
    mark = ir.edit_mark()
    graph.touch(ops["d"])
    names = [op._outputs[0].name for op in _worklist.visit(graph, mark)]  # type: ignore[union-attr]
    assert names == ["c", "d", "e"]
    backwards = _worklist.visit(graph, mark, reverse=True)
    assert [op._outputs[0].name for op in backwards] == ["e", "d", "c"]  # type: ignore[union-attr]
    assert list(_worklist.visit(graph, ir.edit_mark())) == []


def test_edits_during_a_visit_add_the_ops_they_touch_ahead(forced: None) -> None:
    model = model_from_text(CHAIN)
    graph, ops = model.graph, _ops(model)
    mark = ir.edit_mark()
    graph.touch(ops["a"])
    seen = []
    for op in _worklist.visit(graph, mark):
        seen.append(op._outputs[0].name)  # type: ignore[union-attr]
        if op is ops["b"]:
            graph.touch(ops["e"])  # ahead: visited in this run, with its neighbours
            graph.touch(ops["a"])  # behind: left to the next run
    assert seen == ["a", "b", "d", "e", "f"]


def test_many_touched_ops_are_visited_by_walking_every_op() -> None:
    model = model_from_text(CHAIN)
    graph, ops = model.graph, _ops(model)
    mark = ir.edit_mark()
    graph.touch(ops["d"])  # 1 of 7 ops: more than 1 in SWEEP_SHARE (16)
    assert list(_worklist.visit(graph, mark)) == graph.topo_order()


def test_a_second_round_that_finds_nothing_visits_only_what_the_first_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sparse scale graph: 2,000 ops, one Identity removed in the first round; the
    second round's passes look at a few ops each instead of some 2,000."""
    model = io.from_proto(scale_graphs.sparse(2000))
    visited: list[int] = []
    real = _worklist.visit

    def counting(graph: ir.Graph, since: int | None, **kw: Any) -> Any:
        ops = list(real(graph, since, **kw))
        visited.append(len(ops))
        return iter(ops)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("onnxforge.passes.") and getattr(module, "visit", 0) is real:
            monkeypatch.setattr(module, "visit", counting)
    _, rounds = _optimized(model, True, False)
    assert rounds == [2]
    first, second = visited[: len(visited) // 2], visited[len(visited) // 2 :]
    assert min(first) > 1900, first  # every op (one Identity fewer after the first pass)
    assert max(second) < 20, second


# -- what each pass counts as near a touched op -----------------------------------------------
def _named(model: Model) -> dict[str, ir.Op]:
    return {op.name: op for g in model.graphs() for op in g.ops}


def _names(ops: Any) -> set[str]:
    return {op.name for op in ops}


def test_near_a_possible_duplicate_are_the_other_readers_of_its_least_read_input() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x, float[N, 4] z) => (float[N, 4] y) {
        [a] p = Add(x, z) [b] q = Add(z, x) [c] r = Relu(x) [d] s = Relu(z) [e] t = Sum(p, q, r)
        [f] y = Add(t, s)
    }""")
    ops = _named(model)
    assert _names(cse._same_inputs(model.graph, ops["a"])) == {"a", "b", "c"}  # x: 3 readers
    assert _names(cse._same_inputs(model.graph, ops["d"])) == {"a", "b", "d"}


def test_near_an_op_for_sink_shape_ops_is_the_transpose_up_its_elementwise_ops() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 3] y) {
        [t] r = Transpose<perm=[1, 0]>(x) [a] u = Relu(r) [b] v = Neg(u) [m] w = MatMul(v, x)
        [q] y = Transpose<perm=[1, 0]>(w)
    }""")
    ops = _named(model)
    near = sink._near_region()
    assert _names(near(model.graph, ops["b"])) == {"a", "b", "m", "t"}  # t: two ops up
    assert "t" not in _names(near(model.graph, ops["q"]))  # a MatMul between them


def test_near_a_shape_value_are_the_producers_of_the_same_known_elements() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 4] y) {
        [s1] a = Shape(x) [n] b = Neg(x) [s2] c = Shape(b) [k] d = Shape(a) [r] y = Reshape(b, c)
    }""")
    ops = _named(model)
    known = rewrite.inference(model).known_values
    near = simplify._near_same_known(model.graph, known)
    assert {"s1", "s2"} <= _names(near(model.graph, ops["s2"]))
    assert "k" not in _names(near(model.graph, ops["s2"]))  # [2], not [N, 4]


def test_near_a_matmul_are_the_matmuls_of_its_input() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x, float[4, 3] w, float[4, 3] v) => (float[N, 3] y) {
        [a] p = MatMul(x, w) [b] q = MatMul(x, v) [c] r = MatMul(p, v) [d] y = Add(q, r)
    }""")
    ops = _named(model)
    assert _names(merge._near_siblings(model.graph, ops["d"])) == {"a", "b", "c", "d"}
    assert _names(merge._near_siblings(model.graph, ops["c"])) == {"a", "b", "c", "d"}


@pytest.mark.parametrize("tracked", [True, False], ids=["brought_up_to_date", "whole"])
def test_inference_touches_the_readers_of_a_value_whose_type_changed(tracked: bool) -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 6] x) => (float[?, ?] y) {
        [t] s = Constant<value = int64[2] {3, 4}>() [r] h = Reshape(x, s) [a] y = Relu(h)
        [b] z = Neg(x)
    }""")
    ops = _named(model)
    rewrite.inference(model)
    mark = ir.edit_mark()
    flat = model.graph.add_initializer("flat", ir.Tensor.from_numpy(np.array([12], np.int64)))
    model.graph.set_input(ops["r"], 1, flat)  # touches the Reshape, not the Relu
    _infra.note_change(tracked=tracked)
    rewrite.inference(model)  # [3, 4] -> [12] reaches the Relu
    assert "a" in _names(model.graph.touched_since(mark))
    assert "b" not in _names(model.graph.touched_since(mark))


def test_the_last_reader_of_an_initializer_is_touched_when_the_others_go() -> None:
    """It may own the weight now (merge-parallel-matmuls, the Conv fusions ask)."""
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[N, 3] y) {
        [w] v = Constant<value = float[4, 3] {1,2,3,4,5,6,7,8,9,10,11,12}>()
        [a] y = MatMul(x, v) [b] z = MatMul(x, v) [c] u = MatMul(x, v)
    }""")
    ops = _named(model)
    fold = ops["w"]
    model.graph.make_constant(fold, [constant_tensor(fold)])  # v: an initializer
    mark = ir.edit_mark()
    model.graph.remove_op(ops["c"])
    assert "a" not in _names(model.graph.touched_since(mark))  # two readers left
    model.graph.remove_op(ops["b"])
    assert "a" in _names(model.graph.touched_since(mark))
