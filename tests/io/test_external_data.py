"""External data: memory-mapped on load, written again on save, refused when it could escape."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxforge.errors import ModelReadError, OnnxForgeError, UnsafeExternalDataError
from onnxforge.io import load, save, save_stream


def _model_with_weights(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    names = list(weights)
    nodes = [helper.make_node("Add", ["x", names[0]], ["y0"])]
    for i, name in enumerate(names[1:], 1):
        nodes.append(helper.make_node("Add", [f"y{i - 1}", name], [f"y{i}"]))
    shape = list(next(iter(weights.values())).shape)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"y{len(names) - 1}", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(w, name) for name, w in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _save_external(proto: onnx.ModelProto, path: Path, location: str = "weights.bin") -> None:
    onnx.save_model(proto, path, save_as_external_data=True, location=location, size_threshold=0)


def _fully_loaded(path: Path) -> onnx.ModelProto:
    """The model with external bytes read in, external bookkeeping dropped: what it means."""
    proto = onnx.load(path)
    for t in proto.graph.initializer:
        t.ClearField("data_location")
        t.ClearField("external_data")
    return proto


@pytest.fixture
def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "big": rng.standard_normal((64, 64)).astype(np.float32),
        "small": rng.standard_normal((64, 64)).astype(np.float32)[:1].repeat(64, 0),
    }


def test_external_tensors_are_views_of_the_data_file(tmp_path: Path, weights) -> None:
    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    model = load(tmp_path / "m.onnx")
    for value in model.graph.initializers:
        array = value.const.numpy()
        assert not array.flags.owndata and not array.flags.writeable
        np.testing.assert_array_equal(array, weights[value.name])


def test_external_model_round_trips_with_external_data_again(tmp_path: Path, weights) -> None:
    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    save(load(tmp_path / "m.onnx"), out_dir / "r.onnx")
    assert sorted(p.name for p in out_dir.iterdir()) == ["r.onnx", "r.onnx.data"]
    written = onnx.load(out_dir / "r.onnx", load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in written.graph.initializer)
    assert _fully_loaded(out_dir / "r.onnx") == _fully_loaded(tmp_path / "m.onnx")


def test_threshold_and_location_choose_what_goes_external(tmp_path: Path, weights) -> None:
    onnx.save(_model_with_weights(weights), tmp_path / "m.onnx")
    model = load(tmp_path / "m.onnx")
    save(model, tmp_path / "e.onnx", external_data=True, size_threshold=1 << 20, location="w.bin")
    assert not (tmp_path / "w.bin").stat().st_size  # nothing reached the threshold
    save(model, tmp_path / "e.onnx", external_data=True, location="w.bin")
    assert (tmp_path / "w.bin").stat().st_size == sum(w.nbytes for w in weights.values())
    assert _fully_loaded(tmp_path / "e.onnx") == onnx.load(tmp_path / "m.onnx")
    save(load(tmp_path / "e.onnx"), tmp_path / "back.onnx", external_data=False)
    assert onnx.load(tmp_path / "back.onnx") == onnx.load(tmp_path / "m.onnx")


def test_location_for_saving_must_be_a_plain_file_name(tmp_path: Path, weights) -> None:
    onnx.save(_model_with_weights(weights), tmp_path / "m.onnx")
    with pytest.raises(OnnxForgeError, match="must be a file name beside the model"):
        save(load(tmp_path / "m.onnx"), tmp_path / "e.onnx", external_data=True, location="../w")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def _retarget(path: Path, location: str, **extra: str) -> None:
    proto = onnx.load(path, load_external_data=False)
    for t in proto.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
            elif entry.key in extra:
                entry.value = extra[entry.key]
    onnx.save(proto, path)


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("/etc/passwd", "is absolute"),
        ("../outside.bin", "points outside the model's folder"),
        ("sub/../../outside.bin", "points outside the model's folder"),
        ("missing.bin", "does not exist"),
        ("", "is empty"),
    ],
)
def test_unsafe_or_missing_locations_are_refused(
    tmp_path: Path, weights, location, reason
) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 32768)
    _save_external(_model_with_weights(weights), model_dir / "m.onnx")
    _retarget(model_dir / "m.onnx", location)
    with pytest.raises(ModelReadError, match=reason) as info:
        load(model_dir / "m.onnx")
    assert "tensor 'big'" in str(info.value) and str(model_dir / "m.onnx") in str(info.value)


def test_symlinks_in_any_component_are_refused(tmp_path: Path, weights) -> None:
    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    (tmp_path / "real").mkdir()
    os.replace(tmp_path / "weights.bin", tmp_path / "real" / "weights.bin")
    (tmp_path / "linkdir").symlink_to(tmp_path / "real")
    _retarget(tmp_path / "m.onnx", "linkdir/weights.bin")
    with pytest.raises(UnsafeExternalDataError, match="symbolic link"):
        load(tmp_path / "m.onnx")
    (tmp_path / "link.bin").symlink_to(tmp_path / "real" / "weights.bin")
    _retarget(tmp_path / "m.onnx", "link.bin")
    with pytest.raises(UnsafeExternalDataError, match="symbolic link"):
        load(tmp_path / "m.onnx")


def test_hard_linked_data_files_are_refused(tmp_path: Path, weights) -> None:
    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    os.link(tmp_path / "weights.bin", tmp_path / "other.bin")
    with pytest.raises(UnsafeExternalDataError, match="single hard link"):
        load(tmp_path / "m.onnx")


def test_offsets_past_the_end_of_the_file_are_refused(tmp_path: Path, weights) -> None:
    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    _retarget(tmp_path / "m.onnx", "weights.bin", offset="30000")
    with pytest.raises(ModelReadError, match="lies outside 'weights.bin'"):
        load(tmp_path / "m.onnx")


def test_external_data_cannot_be_read_from_an_in_memory_proto(tmp_path: Path, weights) -> None:
    from onnxforge.io import from_proto

    _save_external(_model_with_weights(weights), tmp_path / "m.onnx")
    with pytest.raises(ModelReadError, match="load the model from its file"):
        from_proto(onnx.load(tmp_path / "m.onnx", load_external_data=False))


@pytest.mark.parametrize("external", [True, False])
def test_save_reports_its_progress_in_weight_bytes(tmp_path: Path, external: bool) -> None:
    weights = {f"w{i}": np.full((64, 64), i, dtype=np.float32) for i in range(3)}
    source = tmp_path / "in.onnx"
    _save_external(_model_with_weights(weights), source)
    seen: list[tuple[int, int]] = []
    save(
        load(source),
        tmp_path / "out.onnx",
        external_data=external,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [done for done, _ in seen] == [16384, 32768, 49152]
    assert {total for _, total in seen} == {49152}


def test_save_stream_writes_the_bytes_a_file_gets_and_refuses_external_data(
    tmp_path: Path,
) -> None:
    weights = {"w": np.arange(4096, dtype=np.float32).reshape(64, 64)}
    source = tmp_path / "in.onnx"
    _save_external(_model_with_weights(weights), source)
    model = load(source)
    with pytest.raises(OnnxForgeError, match="--no-external-data"):
        save_stream(model, io.BytesIO())
    save(model, tmp_path / "embedded.onnx", external_data=False)
    save(load(tmp_path / "embedded.onnx"), tmp_path / "again.onnx")
    read, write = os.pipe()  # a stream that cannot seek
    with os.fdopen(read, "rb") as reader, os.fdopen(write, "wb") as writer:
        save_stream(load(tmp_path / "embedded.onnx"), writer)
        writer.close()
        streamed = reader.read()
    assert streamed == (tmp_path / "again.onnx").read_bytes()
