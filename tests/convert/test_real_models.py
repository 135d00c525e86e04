"""Converting real models: the light zoo models (opset 9) and the exported ones under
ONNXFORGE_EXPORT_DIR (BERT, GPT-2, ViT, T5, Llama, ResNet, MobileNet, LSTM, Loop/If; opsets
11-18) go to 13, 18 and the newest opset onnxruntime loads, and from there back to their own
opset; every result passes onnx's full check and computes what the original does on
onnxruntime (the same random inputs). Opset-18 exports reach 13."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from real_models import exported_models, random_inputs, run_unoptimized
from suites import LIGHT_MODELS

from onnxforge.io import load, save
from onnxforge.passes.convert import convert

pytest.importorskip("onnxruntime")

MAX_BYTES = 300 << 20
RTOL, ATOL = 1e-4, 1e-5


def _latest() -> int:
    from onnxforge.api._check import onnxruntime_limits

    return int(onnxruntime_limits().max_opset[""])


def _targets(source: Path) -> list[int]:
    own = _own_opset(source)
    return [t for t in sorted({13, 18, _latest()}) if t != own]


def _own_opset(path: Path) -> int:
    proto = onnx.load(path, load_external_data=False)
    return next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))


def _converted(source: Path, opset: int, out: Path) -> Path:
    """``source`` converted to ``opset`` and saved to ``out``, which onnx's full check
    passes (by path: the weights stay on disk)."""
    model = load(source)
    convert(model, opset)
    save(model, out)
    onnx.checker.check_model(str(out), full_check=True)
    assert _own_opset(out) == opset
    return out


def _same(path: Path, feeds: dict[str, np.ndarray], want: list[np.ndarray]) -> None:
    got = run_unoptimized(path, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (path.name, i)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=path.name)


def _check(source: Path, target: int, tmp_path: Path) -> None:
    feeds = random_inputs(source)
    want = run_unoptimized(source, feeds)
    up = _converted(source, target, tmp_path / f"{source.stem}_{target}.onnx")
    _same(up, feeds, want)
    back = _converted(up, _own_opset(source), tmp_path / f"{source.stem}_{target}_back.onnx")
    _same(back, feeds, want)


def _cases(paths: list[Path]) -> list[object]:
    return [pytest.param(p, t, id=f"{p.stem}-{t}") for p in paths for t in _targets(p)]


@pytest.mark.parametrize(("source", "target"), _cases(LIGHT_MODELS))
def test_zoo_model_converts_to_the_target_and_back_computing_the_same(
    source: Path, target: int, tmp_path: Path
) -> None:
    _check(source, target, tmp_path)


@pytest.mark.skipif(
    not exported_models(MAX_BYTES),
    reason="set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)",
)
@pytest.mark.parametrize(("source", "target"), _cases(exported_models(MAX_BYTES)))
def test_exported_model_converts_to_the_target_and_back_computing_the_same(
    source: Path, target: int, tmp_path: Path
) -> None:
    _check(source, target, tmp_path)
