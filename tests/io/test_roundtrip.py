"""load -> save with no pass in between gives back an equal model, on every suite onnx ships."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from suites import LIGHT_MODELS, disk_models, node_cases

from onnxforge.io import from_proto, load, save, to_proto


def _assert_same(original: onnx.ModelProto, result: onnx.ModelProto) -> None:
    if original != result:  # show where, not two opaque protos
        import difflib

        diff = difflib.unified_diff(
            str(original).splitlines(), str(result).splitlines(), lineterm="", n=2
        )
        pytest.fail("round trip changed the model:\n" + "\n".join(list(diff)[:40]))


def _round_trip_file(source: Path, tmp_path: Path) -> Path:
    """Both ways a save writes a loaded model: from our graph (built, as every pass builds
    it) and from the parsed protobuf (the graph never used)."""
    original = onnx.load(source)
    built = load(source)
    assert built.graph is not None and built.built
    save(built, tmp_path / "built.onnx")
    _assert_same(original, onnx.load(tmp_path / "built.onnx"))
    out = tmp_path / "resaved.onnx"
    unbuilt = load(source)
    save(unbuilt, out)
    assert not unbuilt.built
    _assert_same(original, onnx.load(out))
    return out


def test_a_loaded_graph_is_built_on_first_use_and_metadata_edits_are_written(
    tmp_path: Path,
) -> None:
    source = LIGHT_MODELS[0]
    model = load(source)
    assert not model.built
    model.producer_name = "edited"
    model.metadata_props.append(("k", "v"))
    save(model, tmp_path / "m.onnx")
    assert not model.built
    written = onnx.load(tmp_path / "m.onnx")
    assert written.producer_name == "edited"
    assert [(p.key, p.value) for p in written.metadata_props][-1] == ("k", "v")
    expected = onnx.load(source)
    expected.producer_name = "edited"
    expected.metadata_props.add(key="k", value="v")
    _assert_same(expected, written)
    assert len(model.graph.ops) == len(expected.graph.node) and model.built


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_node_suite_model_round_trips(name: str, tmp_path: Path) -> None:
    proto = node_cases()[name].model
    source = tmp_path / "model.onnx"
    onnx.save(proto, source)
    _round_trip_file(source, tmp_path)
    _assert_same(proto, to_proto(from_proto(proto)))


@pytest.mark.parametrize("key", sorted(disk_models()))
def test_disk_suite_model_round_trips(key: str, tmp_path: Path) -> None:
    _round_trip_file(disk_models()[key], tmp_path)


@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_zoo_model_round_trips(source: Path, tmp_path: Path) -> None:
    _round_trip_file(source, tmp_path)


def test_weights_of_large_files_stay_in_the_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(5)]  # 20 MiB
    inits = [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)]
    inits.append(numpy_helper.from_array(np.ones(3, np.float32), "tiny"))
    nodes = [helper.make_node("Add", [f"w{i}", f"w{i + 1}"], [f"s{i}"]) for i in range(4)]
    graph = helper.make_graph(
        nodes, "g", [], [helper.make_tensor_value_info(f"s{i}", 1, None) for i in range(4)], inits
    )
    source = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph), source)
    model = load(source)
    tensors = [v.const for v in model.graph.initializers]
    assert all(t.span is not None for t in tensors[:5]) and tensors[5].span is None  # tiny: inline
    array = tensors[0].numpy()
    assert not array.flags.writeable and not array.flags.owndata  # a view of the mapped file
    np.testing.assert_array_equal(array, weights[0])
    _round_trip_file(source, tmp_path)
    assert all(t._array is None for t in tensors[1:5])  # saving read none into arrays


def test_saving_over_the_input_keeps_the_loaded_weights_valid(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    source.write_bytes(LIGHT_MODELS[0].read_bytes())
    model = load(source)
    before = {v.name: v.const.numpy().copy() for v in model.graph.initializers}
    save(model, source)
    save(model, tmp_path / "again.onnx")
    _assert_same(onnx.load(LIGHT_MODELS[0]), onnx.load(tmp_path / "again.onnx"))
    for value in load(source).graph.initializers:
        np.testing.assert_array_equal(value.const.numpy(), before[value.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.onnx", "m.onnx"]


def _weights_model(path: Path, *, tensors: int, elements: int) -> onnx.ModelProto:
    """A chain of Adds over ``tensors`` float32 initializers of ``elements`` each."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal(elements).astype(np.float32), f"w{i}")
        for i in range(tensors)
    ]
    nodes = [
        onnx.helper.make_node("Add", ["x" if i == 0 else f"a{i - 1}", f"w{i}"], [f"a{i}"])
        for i in range(tensors)
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [elements])],
        [onnx.helper.make_tensor_value_info(f"a{tensors - 1}", onnx.TensorProto.FLOAT, None)],
        inits,
    )
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.save(proto, path)
    return proto


@pytest.mark.parametrize(
    ("tensors", "elements", "mapped"),
    [(8, 1 << 17, True), (4000, 300, False), (4, 1 << 14, False)],
    ids=["4 MB of weights", "4000 1.2 KB weights", "under 1 MiB"],
)
def test_weights_stay_in_the_file_when_the_graph_is_mostly_weights(
    tmp_path: Path, tensors: int, elements: int, mapped: bool
) -> None:
    """Files of 1 to 16 MiB keep their weights mapped when the graph has at most one field per
    KiB; either way the model round trips unchanged, built or not."""
    proto = _weights_model(tmp_path / "m.onnx", tensors=tensors, elements=elements)
    model = load(tmp_path / "m.onnx")
    assert all((v.const.span is not None) is mapped for v in model.graph.initializers)
    save(model, tmp_path / "built.onnx")
    save(load(tmp_path / "m.onnx"), tmp_path / "unbuilt.onnx")
    assert onnx.load(tmp_path / "built.onnx") == proto
    assert onnx.load(tmp_path / "unbuilt.onnx") == proto
