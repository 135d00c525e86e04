"""Folding real models: the light zoo models (their weights come from ConstantOfShape) and the
models of shared/tools/export_models.py compute the same outputs on onnxruntime afterwards, and
no file grows by more than 1% with the default limit."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from suites import LIGHT_MODELS

from onnxforge.io import load, save
from onnxforge.passes import FoldConstantsPass

ort = pytest.importorskip("onnxruntime")
EXPORT_DIR = os.environ.get("ONNXFORGE_EXPORT_DIR")
MAX_BYTES = 300 << 20


def _exported() -> list[Path]:
    if not EXPORT_DIR or not Path(EXPORT_DIR).is_dir():
        return []
    return [p for p in sorted(Path(EXPORT_DIR).glob("*.onnx")) if p.stat().st_size < MAX_BYTES]


def _feeds(path: Path) -> dict[str, np.ndarray]:
    """Random inputs: batch 2, other dynamic dims 5; integer inputs (ids, masks) in [0, 2)."""
    proto = onnx.load(path, load_external_data=False)
    initialized = {t.name for t in proto.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in initialized:
            continue
        tt = vi.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else (2 if i == 0 else 5)
            for i, d in enumerate(tt.shape.dim)
        ]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_ or dtype.kind in "iu":
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(source: Path, tmp_path: Path) -> None:
    model = load(source)
    FoldConstantsPass()(model)
    out = tmp_path / source.name
    save(model, out)
    grown = out.stat().st_size / source.stat().st_size - 1
    assert grown <= 0.01, f"{source.name} grew by {grown:.2%}"
    feeds = _feeds(source)
    for want, got in zip(_run(source, feeds), _run(out, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_folded_zoo_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)


@pytest.mark.skipif(
    not _exported(),
    reason="set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)",
)
@pytest.mark.parametrize("source", _exported(), ids=[p.stem for p in _exported()])
def test_folded_exported_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)
