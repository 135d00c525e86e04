"""Folding real models: the light zoo models (their weights come from ConstantOfShape) and the
models of shared/tools/export_models.py compute the same outputs on onnxruntime afterwards, and
no file grows by more than 1% with the default limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_models import exported_models, random_inputs, run_unoptimized
from suites import LIGHT_MODELS

from onnxforge.io import load, save
from onnxforge.passes import FoldConstantsPass

ort = pytest.importorskip("onnxruntime")
MAX_BYTES = 300 << 20


def _check(source: Path, tmp_path: Path) -> None:
    model = load(source)
    FoldConstantsPass()(model)
    out = tmp_path / source.name
    save(model, out)
    grown = out.stat().st_size / source.stat().st_size - 1
    assert grown <= 0.01, f"{source.name} grew by {grown:.2%}"
    feeds = random_inputs(source)
    for want, got in zip(run_unoptimized(source, feeds), run_unoptimized(out, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_folded_zoo_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)


@pytest.mark.skipif(
    not exported_models(MAX_BYTES),
    reason="set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)",
)
@pytest.mark.parametrize(
    "source", exported_models(MAX_BYTES), ids=[p.stem for p in exported_models(MAX_BYTES)]
)
def test_folded_exported_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)
