"""onnxruntime reads our re-saved files (weights spliced after other fields) and computes
exactly what it computes on the originals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from suites import disk_models, node_cases

from onnxforge.io import load, save

ort = pytest.importorskip("onnxruntime")


def _session(path: Path) -> object:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _run_both(original: Path, tmp_path: Path, feeds: dict[str, np.ndarray]) -> None:
    try:
        expected = _session(original).run(None, feeds)
    except Exception as exc:  # noqa: BLE001  (ort's own errors have no common base)
        pytest.skip(f"onnxruntime cannot run the original: {str(exc).splitlines()[0][:160]}")
    resaved = tmp_path / "resaved.onnx"
    save(load(original), resaved)
    actual = _session(resaved).run(None, feeds)
    _assert_identical(actual, expected)


def _assert_identical(actual: object, expected: object) -> None:
    """Equal arrays, element by element through sequences; NaN equals NaN."""
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _assert_identical(a, e)
    else:
        np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


@pytest.mark.parametrize("name", sorted(node_cases()))
def test_node_suite_outputs_identical_after_round_trip(name: str, tmp_path: Path) -> None:
    case = node_cases()[name]
    if not case.data_sets:
        pytest.skip("the case has no input data")
    source = tmp_path / "model.onnx"
    onnx.save(case.model, source)
    inputs = case.data_sets[0][0]
    names = [
        i.name
        for i in case.model.graph.input
        if i.name not in {t.name for t in case.model.graph.initializer}
    ]
    if len(inputs) != len(names) or any(not isinstance(x, np.ndarray) for x in inputs):
        pytest.skip("sequence or optional inputs")
    _run_both(source, tmp_path, dict(zip(names, inputs, strict=True)))


@pytest.mark.parametrize("key", sorted(disk_models()))
def test_disk_suite_outputs_identical_after_round_trip(key: str, tmp_path: Path) -> None:
    path = disk_models()[key]
    data = sorted((path.parent / "test_data_set_0").glob("input_*.pb"))
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds = {}
    for name, pb in zip(names, data, strict=False):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(pb.read_bytes())
        feeds[name] = numpy_helper.to_array(tensor)
    if len(feeds) != len(names):
        pytest.skip("inputs are not tensors")
    _run_both(path, tmp_path, feeds)
