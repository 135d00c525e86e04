"""The synthetic graphs of benchmarks/scale.py, small: optimize keeps what they compute on
onnxruntime (scale.same_outputs, which calls non-finite outputs not comparable; its own check
at 10k nodes takes onnxruntime a minute to set up)."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxforge.cli import app

pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import scale  # noqa: E402
import scale_graphs  # noqa: E402

runner = CliRunner()


@pytest.mark.parametrize("family", sorted(scale_graphs.FAMILIES))
def test_optimize_keeps_what_each_scale_graph_computes(family: str, tmp_path: Path) -> None:
    src, out = tmp_path / "g.onnx", tmp_path / "o.onnx"
    size = 2 * scale_graphs.SPARSE_EVERY if family == "sparse" else 600  # one Identity
    onnx.save(scale_graphs.FAMILIES[family](size), src)
    result = runner.invoke(app, ["optimize", str(src), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert scale.same_outputs(src, out) == "same"
    before, after = (len(onnx.load(p).graph.node) for p in (src, out))
    if family == "blocks":  # the Identity, a Relu and the shape computations go
        assert after < before * 0.6, (before, after)
    elif family == "sparse":
        assert after == before - 1, (before, after)
    else:
        assert after <= before
