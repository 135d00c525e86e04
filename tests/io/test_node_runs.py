"""A large model's main-graph nodes are cut out of the parse and read a run at a time
(io._wire.split_weights): the model reads, writes and reports errors as if parsed whole, and
the IR keeps no part of the parse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf.message import DecodeError, Message
from onnx import helper, numpy_helper

from onnxforge.errors import ModelReadError
from onnxforge.io import data_files, load, save
from onnxforge.io._wire import NODE_RUN
from onnxforge.ir import walk_graphs

NODES = 2 * NODE_RUN + 100  # three runs


def _model(nodes: int = NODES) -> onnx.ModelProto:
    """A chain of Relu and Add, with attributes, metadata and a Loop body among them, and a
    weight large enough (10 MB) for load to scan the graph's fields."""
    made = []
    prev = "x"
    for i in range(nodes):
        out = f"v{i}"
        if i == 7:
            made.append(helper.make_node("Transpose", [prev], [out], perm=[1, 0], name="t"))
        elif i == 11:
            node = helper.make_node("Add", [prev, "w"], [out], doc_string="kept")
            node.metadata_props.add(key="k", value="v")
            made.append(node)
        elif i == NODE_RUN + 3:
            body = helper.make_graph(
                [helper.make_node("Add", ["acc", prev], ["acc_out"])],
                "body",
                [
                    helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
                    helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
                    helper.make_tensor_value_info("acc", onnx.TensorProto.FLOAT, [4, 4]),
                ],
                [
                    helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
                    helper.make_tensor_value_info("acc_out", onnx.TensorProto.FLOAT, [4, 4]),
                ],
            )
            made.append(helper.make_node("Loop", ["trips", "", prev], [out], body=body))
        else:
            made.append(helper.make_node("Relu", [prev], [out]))
        prev = out
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    big = numpy_helper.from_array(np.zeros(10 << 18, np.float32), "big")  # unused, 10 MiB
    trips = numpy_helper.from_array(np.array(2, np.int64), "trips")
    graph = helper.make_graph(
        made,
        "runs",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, [4, 4])],
        [weight, big, trips],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "m.onnx"
    onnx.save(_model(), path)
    return path


def test_the_nodes_are_read_in_runs_and_the_model_is_the_same(
    model_file: Path, tmp_path: Path
) -> None:
    model = load(model_file)
    assert len(model._source_nodes) == 3  # cut into runs, parsed when built
    assert len(model._source.graph.node) == 0
    assert model_file in data_files(model)  # the unbuilt model's nodes are in the file
    save(model, tmp_path / "unbuilt.onnx")
    assert not model.built
    assert onnx.load(tmp_path / "unbuilt.onnx") == onnx.load(model_file)
    ops = list(model.graph.topo_order())
    assert len(ops) == NODES
    assert ops[7].attrs["perm"] == [1, 0]
    save(model, tmp_path / "built.onnx")
    assert onnx.load(tmp_path / "built.onnx") == onnx.load(model_file)


def test_the_ir_keeps_no_part_of_the_parse(model_file: Path) -> None:
    """Every op's source is a record, shared where nodes are alike, and the model keeps its
    fields without the graph's nodes: a message of the parse would keep all of it alive."""
    model = load(model_file)
    graph = model.graph
    assert model._source_nodes is None
    assert not model._source.graph.node
    sources = {id(op._source) for g in walk_graphs(graph) for op in g.ops}
    assert len(sources) < 10
    for g in walk_graphs(graph):
        for op in g.ops:
            assert not isinstance(op._source, Message)
        assert not g._source.proto.node


def test_a_corrupted_node_fails_the_load_as_before(model_file: Path, tmp_path: Path) -> None:
    data = bytearray(model_file.read_bytes())
    at = data.index(b"v5000")  # a name inside a node of the second run
    data[at - 1] = 0x7F  # its length now runs past the node
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(bytes(data))
    with pytest.raises(DecodeError):  # protobuf agrees it is unreadable
        onnx.ModelProto().ParseFromString(bytes(data))
    with pytest.raises(ModelReadError, match="truncated or corrupted"):
        load(bad)


def test_uses_of_a_value_defined_later_are_in_node_order(tmp_path: Path) -> None:
    """A graph out of order: a reader before the producer waits for the second pass, yet the
    value's uses list the readers in node order, as the single-pass reader listed them."""
    proto = _model(NODE_RUN + 10)
    nodes = list(proto.graph.node)
    first_readers = [n for n in nodes if "v3" in n.input]
    proto.graph.node.insert(0, helper.make_node("Neg", ["v3"], ["early"]))
    proto.graph.output.append(helper.make_tensor_value_info("early", onnx.TensorProto.FLOAT, None))
    path = tmp_path / "unsorted.onnx"
    onnx.save(proto, path)
    model = load(path)
    graph = model.graph
    v3 = next(v for v in graph.values() if v.name == "v3")
    readers = [op.op_type for op, _ in graph.uses(v3)]
    assert readers == ["Neg", *(n.op_type for n in first_readers)]
