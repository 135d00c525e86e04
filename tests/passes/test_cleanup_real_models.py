"""fold-constants and the cleanup passes to a fixed point on real models: the light zoo
models and the exported ones under 200 MB compute the same outputs on onnxruntime for two
sets of dynamic dims, no file grows by more than 1%, and no model gains nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_models import exported_models, random_inputs, run_unoptimized
from suites import LIGHT_MODELS

from onnxforge.io import load, save
from onnxforge.ir import Model
from onnxforge.passes import FixedPoint, FoldConstantsPass, PassManager, cleanup_passes

pytest.importorskip("onnxruntime")
MAX_BYTES = 200 << 20
DIMS = ((2, 5), (3, 7))
"""(batch, other dynamic dims): two sets, so a dim merged with another by mistake shows."""


def _nodes(model: Model) -> int:
    """Nodes of the main graph and its bodies, as benchmarks/fold.py counts them."""
    return sum(len(graph) for graph in model.graphs(functions=False))


def _check(source: Path, tmp_path: Path) -> None:
    model = load(source)
    before = _nodes(model)
    report = PassManager([FixedPoint([FoldConstantsPass(), *cleanup_passes()])], verify_each=True)
    row = report.run(model).rows[0]
    assert row.stats["iterations"] < 8, f"{source.name}: no fixed point in 8 iterations"
    out = tmp_path / source.name
    save(model, out)
    grown = out.stat().st_size / source.stat().st_size - 1
    assert grown <= 0.01, f"{source.name} grew by {grown:.2%}"
    assert _nodes(model) <= before
    for batch, other in DIMS:
        feeds = random_inputs(source, batch=batch, other=other)
        want, got = run_unoptimized(source, feeds), run_unoptimized(out, feeds)
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            np.testing.assert_allclose(
                g, w, rtol=1e-4, atol=1e-5, equal_nan=True, err_msg=f"output {i}"
            )


@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_cleaned_zoo_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)


@pytest.mark.skipif(
    not exported_models(MAX_BYTES),
    reason="set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)",
)
@pytest.mark.parametrize(
    "source", exported_models(MAX_BYTES), ids=[p.stem for p in exported_models(MAX_BYTES)]
)
def test_cleaned_exported_model_computes_the_same(source: Path, tmp_path: Path) -> None:
    _check(source, tmp_path)
