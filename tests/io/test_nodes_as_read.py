"""`load(keep_nodes=True)` (what `infer -o` uses): the main graph's nodes are written as the
file has them while the ops are the ones read, and encoded again as soon as that may no longer
hold. Either way the written model must equal what encoding every op gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.io import load, save
from onnxforge.io._convert import nodes_as_read
from onnxforge.passes import PASSES, PassManager
from onnxforge.shape_infer import infer

NODES = 9_000  # three runs of nodes (io._wire.NODE_RUN)


def _chain(nodes: int = NODES, *, loop: bool = False) -> onnx.ModelProto:
    """Add, Softmax (an attribute), an Identity and a node with docs and metadata, on
    x[N, 4], with declared types on nothing but the graph's input and output; an unused
    weight makes the file over 1 MiB, so load cuts its nodes into runs."""
    made = []
    prev = "x"
    for i in range(nodes):
        out = f"v{i}"
        if i % 3 == 0:
            made.append(helper.make_node("Softmax", [prev], [out], axis=1, name=f"s{i}"))
        elif i == 5:
            made.append(helper.make_node("Identity", [prev], [out]))
        elif i == 7:
            node = helper.make_node("Add", [prev, "w"], [out], doc_string="kept")
            node.metadata_props.add(key="k", value="v")
            made.append(node)
        elif loop and i == 8:
            body = helper.make_graph(
                [helper.make_node("Add", ["acc", "w"], ["acc_out"])],
                "body",
                [
                    helper.make_tensor_value_info("i", TensorProto.INT64, []),
                    helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("acc", TensorProto.FLOAT, None),
                ],
                [
                    helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None),
                ],
            )
            made.append(helper.make_node("Loop", ["trips", "", prev], [out], body=body))
        else:
            made.append(helper.make_node("Add", [prev, "w"], [out]))
        prev = out
    graph = helper.make_graph(
        made,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 4])],
        [
            numpy_helper.from_array(np.ones(4, np.float32), "w"),
            numpy_helper.from_array(np.array(2, np.int64), "trips"),
            numpy_helper.from_array(np.zeros(300_000, np.float32), "unused"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kept") / "chain.onnx"
    onnx.save(_chain(), path)
    assert path.stat().st_size >= 1 << 20
    return path


def _inferred(path: Path, out: Path, *, keep_nodes: bool) -> onnx.ModelProto:
    model = load(path, keep_nodes=keep_nodes)
    report = infer(model)
    assert not report.errors
    save(model, out)
    return onnx.load(out)


def test_nodes_are_written_as_read_and_the_model_is_what_encoding_gives(
    chain_file: Path, tmp_path: Path
) -> None:
    model = load(chain_file, keep_nodes=True)
    infer(model)
    assert nodes_as_read(model) is not None  # the path under test is the one taken
    kept = _inferred(chain_file, tmp_path / "kept.onnx", keep_nodes=True)
    encoded = _inferred(chain_file, tmp_path / "encoded.onnx", keep_nodes=False)
    assert kept == encoded
    assert (tmp_path / "kept.onnx").read_bytes() == (tmp_path / "encoded.onnx").read_bytes()
    original = onnx.load(chain_file)
    assert list(kept.graph.node) == list(original.graph.node)
    assert len(kept.graph.value_info) == NODES - 1  # every value but the output: typed
    assert kept.graph.value_info[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_a_pass_manager_run_gives_the_kept_nodes_up(chain_file: Path, tmp_path: Path) -> None:
    model = load(chain_file, keep_nodes=True)
    PassManager([PASSES["eliminate-identity"]()]).run(model)
    assert model._loaded_nodes is None and nodes_as_read(model) is None
    save(model, tmp_path / "out.onnx")
    written = onnx.load(tmp_path / "out.onnx")
    assert len(written.graph.node) == NODES - 1
    assert "Identity" not in {n.op_type for n in written.graph.node}


def test_an_op_removed_by_hand_is_seen(chain_file: Path, tmp_path: Path) -> None:
    model = load(chain_file, keep_nodes=True)
    graph = model.graph
    (identity,) = [op for op in graph.ops if op.op_type == "Identity"]
    (out,), (source,) = graph.outputs_of(identity), graph.inputs_of(identity)
    graph.replace_all_uses(out, source)  # type: ignore[arg-type]
    graph.remove_op(identity)
    assert nodes_as_read(model) is None
    save(model, tmp_path / "out.onnx")
    assert len(onnx.load(tmp_path / "out.onnx").graph.node) == NODES - 1


def test_a_graph_with_subgraphs_is_encoded_so_bodies_get_their_types(tmp_path: Path) -> None:
    path = tmp_path / "loop.onnx"
    onnx.save(_chain(loop=True), path)
    model = load(path, keep_nodes=True)
    infer(model)
    assert model._loaded_nodes is not None and nodes_as_read(model) is None
    kept = _inferred(path, tmp_path / "kept.onnx", keep_nodes=True)
    assert kept == _inferred(path, tmp_path / "encoded.onnx", keep_nodes=False)
    (loop,) = [n for n in kept.graph.node if n.op_type == "Loop"]
    assert [vi.name for vi in loop.attribute[0].g.value_info] == []  # body outputs declared
    assert loop.attribute[0].g.output[1].type.tensor_type.shape.dim[1].dim_value == 4


def test_external_data_keeps_nothing(tmp_path: Path) -> None:
    proto = _chain(2000)
    path = tmp_path / "ext.onnx"
    onnx.save(proto, path, save_as_external_data=True, location="ext.data", size_threshold=1024)
    model = load(path, keep_nodes=True)
    model.graph  # noqa: B018  (built)
    assert model._loaded_nodes is None


def test_infer_on_the_command_line_writes_what_encoding_gives(
    chain_file: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, ["infer", str(chain_file), "-o", str(tmp_path / "cli.onnx")])
    assert result.exit_code == 0, result.output
    encoded = _inferred(chain_file, tmp_path / "encoded.onnx", keep_nodes=False)
    assert (tmp_path / "cli.onnx").read_bytes() == (tmp_path / "encoded.onnx").read_bytes()
    assert onnx.load(tmp_path / "cli.onnx") == encoded


def test_infer_in_place_reads_the_nodes_before_replacing_the_file(
    chain_file: Path, tmp_path: Path
) -> None:
    """The nodes are copied from the file being replaced: it is renamed over only once the new
    one is whole."""
    target = tmp_path / "in_place.onnx"
    target.write_bytes(chain_file.read_bytes())
    result = CliRunner().invoke(app, ["infer", str(target), "--in-place"])
    assert result.exit_code == 0, result.output
    encoded = _inferred(chain_file, tmp_path / "encoded.onnx", keep_nodes=False)
    assert target.read_bytes() == (tmp_path / "encoded.onnx").read_bytes()
    assert onnx.load(target) == encoded
