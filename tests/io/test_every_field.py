"""Every field the issue names survives load -> save, on one model that sets them all, and
edits made through the IR are what gets written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxforge.io import _convert, from_proto, load, save, to_proto
from onnxforge.ir import Tensor, TensorType


def _kitchen_sink() -> onnx.ModelProto:
    fn = helper.make_function(
        "custom.fn",
        "Scaled",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["k"], value_float=2.0),
            helper.make_node("Mul", ["a", "k"], ["m"]),
            helper.make_node("LeakyRelu", ["m"], ["b"], alpha=0.0),
        ],
        [helper.make_opsetid("", 18)],
        attributes=["unused"],
    )
    ref = fn.node[2].attribute[0]
    ref.Clear()
    ref.name, ref.ref_attr_name, ref.type = "alpha", "slope", onnx.AttributeProto.FLOAT
    slope = helper.make_attribute("slope", 0.1)
    fn.attribute_proto.append(slope)
    fn.value_info.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    fn.metadata_props.add(key="fn", value="meta")

    then_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("Scaled", ["x"], ["s"], domain="custom.fn", name="call", unused=1),
        helper.make_node("If", ["c"], ["branch"], then_branch=then_g, else_branch=else_g),
        helper.make_node(
            "Add", ["s", "branch"], ["sum"], name="add", domain="", doc_string="adds"
        ),
        helper.make_node("SequenceConstruct", ["sum", "w"], ["seq"]),
        helper.make_node(
            "MyOp",
            ["sum", ""],
            ["custom", "", "extra"],
            domain="vendor.ops",
            strings=[b"\xff\xfe", b"ok"],
            t=numpy_helper.from_array(np.arange(3, dtype=np.int64), "inline"),
        ),
    ]
    nodes[2].metadata_props.add(key="node", value="level")
    nodes[4].attribute.add(name="ints", type=onnx.AttributeProto.INTS)  # empty, typed
    nodes[0].attribute[0].doc_string = "documented"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"], doc_string="in")
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    x.metadata_props.add(key="vi", value="x")
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    seq = helper.make_value_info(
        "seq",
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
    )
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "sp"),
        numpy_helper.from_array(np.array([0, 3], np.int64), "sp_idx"),
        [4],
    )
    unknown_dim = helper.make_tensor_value_info("sum", TensorProto.FLOAT, [None])
    graph = helper.make_graph(
        nodes,
        "sink",
        [x, c],
        [
            helper.make_tensor_value_info("custom", TensorProto.FLOAT, None),
            seq,
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [2]),
        ],
        [numpy_helper.from_array(np.array([3.0, 4.0], np.float32), "w")],
        doc_string="graph doc",
        value_info=[unknown_dim, helper.make_tensor_value_info("dangling", 1, [1])],
        sparse_initializer=[sparse],
    )
    graph.metadata_props.add(key="graph", value="level")
    weight = graph.initializer[0]  # written from its raw bytes: every other field must stay
    weight.doc_string = "weight doc"
    weight.metadata_props.add(key="init", value="level")
    odd = numpy_helper.from_array(np.array([7, 8], np.int64), "odd")
    odd.MergeFromString(b"\xf8\x3e\x01")  # field 999, varint 1: unknown to onnx's schema
    graph.initializer.append(odd)
    graph.output.append(helper.make_tensor_value_info("odd", TensorProto.INT64, [2]))
    annotation = graph.quantization_annotation.add(tensor_name="sum")
    annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value="w")
    model = helper.make_model(
        graph,
        functions=[fn],
        producer_name="sink",
        producer_version="1",
        doc_string="doc",
        opset_imports=[
            helper.make_opsetid("", 18),
            helper.make_opsetid("custom.fn", 1),
            helper.make_opsetid("vendor.ops", 3),
        ],
    )
    model.domain, model.model_version = "", 0  # explicitly set to their defaults
    model.metadata_props.add(key="model", value="level")
    training = model.training_info.add()
    training.algorithm.CopyFrom(helper.make_graph([], "algo", [], []))
    training.update_binding.add(key="w", value="w_new")
    return model


def test_every_field_round_trips_through_a_file(tmp_path: Path) -> None:
    proto = _kitchen_sink()
    onnx.save(proto, tmp_path / "m.onnx")
    save(load(tmp_path / "m.onnx"), tmp_path / "out.onnx")
    assert onnx.load(tmp_path / "out.onnx") == proto
    built = load(tmp_path / "m.onnx")
    assert built.graph is not None  # builds the IR: weights are written from the tensors
    save(built, tmp_path / "built.onnx")
    assert onnx.load(tmp_path / "built.onnx") == proto
    assert to_proto(from_proto(proto)) == proto


def test_the_ir_sees_what_the_file_holds() -> None:
    model = from_proto(_kitchen_sink())
    g = model.graph
    call, if_op, add, _, custom = g.ops
    assert custom.domain == "vendor.ops" and g.inputs_of(custom)[1] is None
    assert [v and v.name for v in g.outputs_of(custom)] == ["custom", None, "extra"]
    assert custom.attrs["strings"] == [b"\xff\xfe", "ok"] and custom.attrs["ints"] == []
    assert custom.attrs["t"].numpy().tolist() == [0, 1, 2]
    fn = model.functions[0]
    assert fn.attribute_defaults == {"slope": np.float32(0.1).item()}
    assert fn.graph.ops[2].attrs["alpha"].name == "slope"
    assert g.initializers[1].const.numpy().tolist() == [7, 8]
    assert g.initializers[2].const.numpy().tolist() == [1.5, 0, 0, 2.5]
    assert str(g.outputs[1].type) == "sequence"
    assert g.inputs[0].doc_string == "in"
    sum_value = g.outputs_of(add)[0]
    assert sum_value.type == TensorType(TensorProto.FLOAT, (None,))
    assert if_op.attrs["else_branch"].captures() == {g.initializers[0]}


def test_edits_made_through_the_ir_are_written(tmp_path: Path) -> None:
    model = from_proto(_kitchen_sink())
    g = model.graph
    add = g.ops[2]
    add.name = "renamed"
    add.attrs["new"] = 1.5
    out = g.outputs_of(add)[0]
    out.name = "total"
    out.type = TensorType(TensorProto.FLOAT, ("batch",))
    g.initializers[0].const = Tensor.from_numpy(np.array([5.0, 6.0], np.float32))
    save(model, tmp_path / "edited.onnx")
    written = onnx.load(tmp_path / "edited.onnx")
    node = written.graph.node[2]
    assert node.name == "renamed" and node.output[0] == "total"
    assert helper.get_attribute_value(node.attribute[0]) == 1.5
    assert [n.input for n in written.graph.node[3:]][0][0] == "total"
    info = {vi.name: vi for vi in written.graph.value_info}
    assert info["total"].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert written.graph.quantization_annotation[0].tensor_name == "sum"  # carried as read
    weight = written.graph.initializer[0]
    assert weight.name == "w" and numpy_helper.to_array(weight).tolist() == [5.0, 6.0]


def test_a_graph_saved_in_batches_is_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save encodes the main graph's nodes and value_info a batch at a time (memory); with
    batches of two, every field still comes back in its place and order."""
    monkeypatch.setattr(_convert, "SPILL_EVERY", 2)
    proto = _kitchen_sink()
    for i in range(5):  # more nodes and value_info than a batch holds
        proto.graph.node.add().CopyFrom(
            helper.make_node("Identity", ["sum"], [f"copy{i}"], name=f"copy{i}")
        )
        proto.graph.value_info.add().CopyFrom(
            helper.make_tensor_value_info(f"copy{i}", TensorProto.FLOAT, [2])
        )
    onnx.save(proto, tmp_path / "m.onnx")
    built = load(tmp_path / "m.onnx")
    assert built.graph is not None
    save(built, tmp_path / "built.onnx")
    assert onnx.load(tmp_path / "built.onnx") == proto
