"""fold-constants: what folds, what does not and why, and that folding never bloats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxforge.io import from_proto, load, save, to_proto
from onnxforge.ir import Model, Tensor, verify
from onnxforge.passes import FoldConstantsPass
from onnxforge.shape_infer import Resumable
from onnxforge.testing import model_from_text, run_onnxruntime

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'
SHAPE_ARITHMETIC = (
    HEADER
    + """
    g (float[2, 12] x) => (float[?, ?, ?] y) {
        a = Constant <value = int64[2] {2, 3}> ()
        b = Constant <value = int64[1] {4}> ()
        s = Concat <axis = 0> (a, b)
        y = Reshape(x, s)
    }"""
)


def _fold(model: Model, **options: object) -> dict[str, int]:
    result = FoldConstantsPass(**options)(model)  # type: ignore[arg-type]
    verify(model)
    return dict(result.stats)


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


def test_shape_arithmetic_on_constants_becomes_one_initializer() -> None:
    model = model_from_text(SHAPE_ARITHMETIC)
    stats = _fold(model)
    assert _ops(model) == ["Reshape"]
    assert stats["folded"] == 1 and stats["constants"] == 2
    (shape,) = [v for v in model.graph.initializers]
    np.testing.assert_array_equal(shape.const.numpy(), [2, 3, 4])


def test_a_constant_of_shape_that_would_bloat_the_model_is_not_folded(tmp_path: Path) -> None:
    # The 254-byte model that onnxsim and onnxslim turn into 2 MB by default.
    model = model_from_text(
        HEADER
        + """
    g (float[512, 1024] x) => (float[512, 1024] y) {
        s = Constant <value = int64[2] {512, 1024}> ()
        z = ConstantOfShape <value = float[1] {1.0}> (s)
        y = Add(x, z)
    }"""
    )
    source = tmp_path / "in.onnx"
    save(model, source)
    stats = _fold(model)
    assert stats == {"constants": 1, "not_folded.too_large": 1}
    save(model, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").stat().st_size < 2 * source.stat().st_size


def test_the_fold_limit_lets_a_larger_constant_through() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[64, 64] x) => (float[64, 64] y) {
        s = Constant <value = int64[2] {64, 64}> ()
        z = ConstantOfShape <value = float[1] {2.0}> (s)
        y = Mul(x, z)
    }"""
    )
    assert _fold(model, limit_bytes=64 * 64 * 4)["folded"] == 1
    (z,) = [v for v in model.graph.initializers if v.name == "z"]
    assert z.const.numpy().shape == (64, 64) and float(z.const.numpy()[0, 0]) == 2.0


def test_a_weight_read_elsewhere_is_not_copied_by_folding() -> None:
    # GPT-2's tied embedding: Transpose(W) would add a second copy of W.
    w = numpy_helper.from_array(np.ones((256, 64), np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["w", "ids"], ["emb"]),
            helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["emb", "wt"], ["logits"]),
        ],
        "g",
        [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [3, 256])],
        [w],
    )
    model = from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert _fold(model) == {"not_folded.too_large": 1}
    assert "Transpose" in _ops(model)


def test_a_weight_only_the_folded_op_reads_is_replaced_not_copied() -> None:
    w = numpy_helper.from_array(np.arange(64 * 32, dtype=np.float32).reshape(64, 32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "wt"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 64])],
        [w],
    )
    model = from_proto(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    )
    x = np.random.default_rng(0).standard_normal((2, 32)).astype(np.float32)
    before = run_onnxruntime(model, {"x": x})
    assert _fold(model) == {"folded": 1}
    assert [v.name for v in model.graph.initializers] == ["wt"]
    np.testing.assert_allclose(run_onnxruntime(model, {"x": x})[0], before[0], rtol=1e-6)


def _gates_model(extra_reader: bool) -> Model:
    """An LSTM-style weight sliced into its four gates (and, optionally, also read whole)."""
    w = numpy_helper.from_array(np.arange(64 * 32, dtype=np.float32).reshape(64, 32), "w")
    nodes, outputs = [], []
    for i in range(4):
        for name, value in ((f"s{i}", 16 * i), (f"e{i}", 16 * (i + 1))):
            nodes.append(helper.make_node("Constant", [], [name], value_ints=[value]))
        nodes.append(helper.make_node("Slice", ["w", f"s{i}", f"e{i}"], [f"g{i}"]))
        nodes.append(helper.make_node("MatMul", ["x", f"g{i}"], [f"y{i}"], name=f"mm{i}"))
        outputs.append(helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, [16, 16]))
    if extra_reader:
        nodes.append(helper.make_node("MatMul", ["w", "x2"], ["whole"]))
        outputs.append(helper.make_tensor_value_info("whole", onnx.TensorProto.FLOAT, [64, 2]))
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [16, 16])]
    inputs += [helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, [32, 2])]
    graph = helper.make_graph(nodes, "g", inputs, outputs, [w])
    return from_proto(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    )


def test_a_weight_every_reader_of_which_folds_is_split_not_copied() -> None:
    model = _gates_model(extra_reader=False)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((16, 16)).astype(np.float32),
        "x2": rng.standard_normal((32, 2)).astype(np.float32),
    }
    before = run_onnxruntime(model, feeds)
    stats = _fold(model)
    assert stats == {"constants": 8, "folded": 4}
    assert sorted(v.name for v in model.graph.initializers) == ["g0", "g1", "g2", "g3"]
    assert sum(v.const.nbytes for v in model.graph.initializers) == 64 * 32 * 4  # no copy
    for got, want in zip(run_onnxruntime(model, feeds), before, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_weight_also_read_by_an_op_that_cannot_fold_is_not_sliced_into_copies() -> None:
    model = _gates_model(extra_reader=True)
    stats = _fold(model)
    assert stats == {"constants": 8, "not_folded.too_large": 4}
    assert _ops(model).count("Slice") == 4


def _budget_model(weight_elements: int, fills: int) -> Model:
    """A weight of ``weight_elements`` floats read by MatMul, and ``fills`` ConstantOfShape
    outputs of 3 KiB each added to the input."""
    w = numpy_helper.from_array(np.ones((weight_elements // 4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["w", "x"], ["m"])]
    shape = numpy_helper.from_array(np.array([768], np.int64), "shape")
    outputs = [helper.make_tensor_value_info("m", onnx.TensorProto.FLOAT, None)]
    for i in range(fills):
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], name=f"fill{i}"))
        nodes.append(helper.make_node("Add", ["v", f"c{i}"], [f"y{i}"]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, [768]))
    inputs = [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 1]),
        helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [768]),
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs, [w, shape])
    return from_proto(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    )


def test_folds_over_the_limit_share_a_budget_of_half_a_percent_of_the_weights() -> None:
    # 1 MiB of weights: a budget of 5242 bytes, room for one 3 KiB fill but not two.
    model = _budget_model(1 << 18, fills=2)
    fold = FoldConstantsPass()
    stats = fold(model).stats
    verify(model)
    assert stats["folded"] == 1 and stats["not_folded.too_large"] == 1
    assert _ops(model).count("ConstantOfShape") == 1
    assert fold(model).stats["not_folded.too_large"] == 1  # a fixed point: one budget


def test_a_model_with_small_weights_has_no_budget_for_generated_constants() -> None:
    model = _budget_model(1 << 14, fills=1)  # 64 KiB of weights: 327 bytes of budget
    assert _fold(model)["not_folded.too_large"] == 1


def test_random_ops_are_never_folded() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] x) => (float[2, 3] y) {
        c = Constant <value = float[2, 3] {1, 2, 3, 4, 5, 6}> ()
        r = RandomNormalLike(c)
        y = Add(x, r)
    }"""
    )
    assert _fold(model) == {"constants": 1, "not_folded.random": 1}


def test_initializers_that_are_graph_inputs_are_defaults_not_constants() -> None:
    graph = helper.make_graph(
        [helper.make_node("Neg", ["w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    model = from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert _fold(model) == {"not_folded.graph_input": 1}
    assert _ops(model) == ["Neg"]


def test_excluded_op_types_and_should_fold_are_obeyed() -> None:
    text = (
        HEADER
        + """
    g (int64[3] x) => (int64[?] y) {
        a = Constant <value = int64[3] {1, 2, 3}> ()
        n = Neg(a)
        y = Add(x, n)
    }"""
    )
    model = model_from_text(text)
    assert _fold(model, exclude={"Neg"})["not_folded.excluded"] == 1
    model = model_from_text(text)
    assert _fold(model, should_fold=lambda op: op.op_type != "Neg")["not_folded.excluded"] == 1


def test_every_refusal_is_reported_after_folds_that_took_several_rounds() -> None:
    """The Neg is refused in the first round; the later rounds, which look only at what
    folding touched (the graph is large enough for them not to walk every op), do not visit
    it again, and its refusal still counts (once)."""
    chain = " ".join(f"r{i + 1} = Relu(r{i})" for i in range(64))
    model = model_from_text(
        HEADER
        + f"""
    g (float[3] x) => (float[3] y, float[3] z, float[3] r64) <float[3] w = {{1, 2, 3}}> {{
        a = Constant <value = float[3] {{4, 5, 6}}> ()
        m = Abs(a)
        y = Add(x, m)
        n = Neg(w)
        z = Add(x, n)
        r0 = Identity(x) {chain}
    }}"""
    )
    stats = _fold(model, exclude={"Neg"})
    assert stats == {"constants": 1, "folded": 1, "not_folded.excluded": 1}
    assert _ops(model)[:3] == ["Add", "Neg", "Add"]


def test_an_if_with_a_constant_condition_becomes_its_branch() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) {
        c = Constant <value = bool {0}> ()
        y = If(c) <
            then_branch = t () => (float[2] a) { a = Neg(x) },
            else_branch = e () => (float[2] b) { b = Abs(x) }
        >
    }"""
    )
    x = np.array([-1.5, 2.0], np.float32)
    stats = _fold(model)
    assert stats["ifs_inlined"] == 1
    assert _ops(model) == ["Abs", "Identity"]
    assert [v.name for v in model.graph.outputs] == ["y"]
    np.testing.assert_array_equal(run_onnxruntime(model, {"x": x})[0], np.abs(x))


def test_subgraphs_fold_with_constants_of_the_enclosing_graph() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool c, float[3] x) => (float[3] y) {
        k = Constant <value = float[3] {1, 2, 3}> ()
        y = If(c) <
            then_branch = t () => (float[3] a) { n = Neg(k)  a = Add(x, n) },
            else_branch = e () => (float[3] b) { b = Identity(x) }
        >
    }"""
    )
    stats = _fold(model)
    assert stats["folded"] == 1
    then_branch = model.graph.ops[0].attrs["then_branch"]
    assert [op.op_type for op in then_branch.ops] == ["Add"]
    x = np.array([1, 1, 1], np.float32)
    out = run_onnxruntime(model, {"c": np.array(True), "x": x})[0]
    np.testing.assert_array_equal(out, [0, -1, -2])


def test_a_legacy_sub_with_axis_folds_to_the_right_values() -> None:
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    graph = helper.make_graph(
        [
            helper.make_node("Sub", ["a", "b"], ["d"], broadcast=1, axis=1),
            helper.make_node("Add", ["x", "d"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 4, 5])],
        [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    proto.ir_version = 3
    del proto.graph.input[1:]
    model = from_proto(proto)
    for v in model.graph.initializers:  # IR 3 lists initializers as inputs; these are not
        assert v not in model.graph.inputs
    assert _fold(model, limit_bytes=1 << 20)["folded"] == 1
    (d,) = [v for v in model.graph.initializers if v.name == "d"]
    np.testing.assert_array_equal(d.const.numpy(), a - b.reshape(1, 3, 4, 1))


@pytest.mark.parametrize(("a", "b"), [((3,), (1, 1)), ((1,), (1, 1)), ((), (1,))])
def test_a_legacy_sub_with_a_one_element_b_of_higher_rank_is_not_evaluated(
    a: tuple[int, ...], b: tuple[int, ...]
) -> None:
    # An invalid model (Sub-6 allows a one-element B only with rank <= rank(A)): the op stays.
    graph = helper.make_graph(
        [helper.make_node("Sub", ["a", "b"], ["y"], broadcast=1)],
        "g",
        [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(a))],
        [
            numpy_helper.from_array(np.full(a, 3.0, np.float32), "a"),
            numpy_helper.from_array(np.full(b, 1.0, np.float32), "b"),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    proto.ir_version = 4  # initializers that are not graph inputs
    model = from_proto(proto)
    stats = _fold(model)
    assert stats == {"not_folded.kernel_error": 1}
    assert _ops(model) == ["Sub"] and len(model.graph.initializers) == 2


@pytest.mark.parametrize("seed", range(3))
def test_folded_models_compute_what_the_original_did(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    proto = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
                helper.make_node("Transpose", ["wt"], ["w2"], perm=[1, 0]),
                helper.make_node("Relu", ["w2"], ["w3"]),
                helper.make_node("MatMul", ["x", "w3"], ["y"]),
            ],
            "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 6])],
            [numpy_helper.from_array(w, "w")],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=10,
    )
    model = from_proto(proto)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    before = run_onnxruntime(proto, {"x": x})[0]
    assert _fold(model)["folded"] == 3
    assert _ops(model) == ["MatMul"]
    np.testing.assert_allclose(run_onnxruntime(to_proto(model), {"x": x})[0], before, rtol=1e-6)
    assert isinstance(model.graph.initializers[0].const, Tensor)


def test_folding_a_loaded_file_never_changes_it(tmp_path: Path) -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[3] x) => (float[3] y) {
        c = Constant <value = float[3] {1, 2, 3}> ()
        y = Add(x, c)
    }"""
    )
    path = tmp_path / "m.onnx"
    save(model, path)
    before = path.read_bytes()
    loaded = load(path)
    _fold(loaded)
    save(loaded, tmp_path / "out.onnx")
    assert path.read_bytes() == before


def test_folded_scalars_stay_scalars() -> None:
    model = model_from_text(
        HEADER
        + """
    g (int64[2] x) => (int64[?] y) {
        v = Constant <value = int64[1] {256}> ()
        a = Constant <value = int64[1] {0}> ()
        s = Squeeze(v, a)
        u = Unsqueeze(s, a)
        y = Concat <axis = 0> (x, u)
    }"""
    )
    _fold(model)
    (u,) = [v for v in model.graph.initializers if v.name == "u"]
    assert u.const.numpy().shape == (1,)
    assert run_onnxruntime(model, {"x": np.array([1, 2])})[0].tolist() == [1, 2, 256]


def test_shape_of_a_static_tensor_folds_without_running_anything() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3, 4] x) => (float[?, ?] y) {
        s = Shape(x)
        i = Constant <value = int64[2] {1, 2}> ()
        d = Gather <axis = 0> (s, i)
        p = ReduceProd <keepdims = 1> (d)
        m = Constant <value = int64[1] {-1}> ()
        t = Concat <axis = 0> (m, p)
        y = Reshape(x, t)
    }"""
    )
    stats = _fold(model)
    assert _ops(model) == ["Shape", "Reshape"] or _ops(model) == ["Reshape"]
    assert stats["folded"] >= 3
    x = np.ones((2, 3, 4), np.float32)
    assert run_onnxruntime(model, {"x": x})[0].shape == (2, 12)


def test_identity_of_a_shared_weight_is_bypassed_not_copied() -> None:
    w = numpy_helper.from_array(np.ones((128, 64), np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Identity", ["w"], ["w_copy"]),
            helper.make_node("MatMul", ["x", "w_copy"], ["a"]),
            helper.make_node("Gather", ["w", "ids"], ["b"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 128]),
            helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [3]),
        ],
        [
            helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [2, 64]),
            helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [3, 64]),
        ],
        [w],
    )
    model = from_proto(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    )
    assert _fold(model) == {"folded": 1}
    assert _ops(model) == ["MatMul", "Gather"]
    assert [v.name for v in model.graph.initializers] == ["w"]


def test_the_next_pass_reuses_the_inference_made_after_the_last_fold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onnxforge.passes import _rewrite

    model = model_from_text(SHAPE_ARITHMETIC)
    inferred: list[int] = []
    real_infer = _rewrite.infer_resumable
    real_again = Resumable.again

    def counting_infer(*args: object, **kwargs: object) -> object:
        inferred.append(len(model.graph))
        return real_infer(*args, **kwargs)  # type: ignore[arg-type]

    def counting_again(self: Resumable, **kwargs: object) -> object:
        inferred.append(-len(model.graph))  # brought up to date, not inferred whole
        return real_again(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_rewrite, "infer_resumable", counting_infer)
    monkeypatch.setattr(Resumable, "again", counting_again)
    result = FoldConstantsPass()(model)
    assert result.modified and result.inferred
    assert inferred == [4, -1]  # before the fold, and the folded model (nothing more to fold)
    report = _rewrite.inference(model)
    assert inferred == [4, -1] and report.ok  # the next pass infers nothing again
    assert model.graph.outputs[0].type.shape == (2, 3, 4)


def test_a_kernel_that_fails_is_a_counted_refusal_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onnxforge import kernels

    def broken(*args: object) -> None:
        raise KeyError("an attribute a kernel looked for")  # a bug, not a numpy error

    monkeypatch.setattr(kernels.KERNELS, "find", lambda *args: broken)  # every op's kernel
    model = model_from_text(SHAPE_ARITHMETIC)
    stats = FoldConstantsPass()(model).stats
    assert stats["not_folded.kernel_error"] == 1 and stats["constants"] == 2
    assert sorted(_ops(model)) == ["Concat", "Reshape"]
