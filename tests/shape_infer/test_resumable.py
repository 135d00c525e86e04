"""Inference brought up to date after edits (``shape_infer.Resumable.again``) gives what
inferring the whole model gives: after every pass of optimize that changed a model, the
types, known elements and errors of the model as the pass left it are compared with a fresh
inference of a copy, value by value (fresh unknown dims may be numbered differently: they are
compared up to renaming). Models: the exporter fixtures (tf2onnx, paddle2onnx, PyTorch legacy
and dynamo, onnxruntime's transformers optimizer), onnx's zoo models, the scale benchmark's
graphs, cases with bodies, local functions and data-dependent dims, and the exported models
of ONNXFORGE_EXPORT_DIR when set."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest

from onnxforge import io
from onnxforge.api._optimize import OptimizeOptions, optimize_model
from onnxforge.ir import Model
from onnxforge.shape_infer import Resumable, infer
from onnxforge.testing import model_from_text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import scale_graphs  # noqa: E402
from edit_cases import EDIT_CASES  # noqa: E402
from real_models import exported_models  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "data" / "exporters").rglob("*.onnx"))
ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
UNKNOWN = re.compile(r"unk__\d+")

CASES = EDIT_CASES


def _canonical(model: Model) -> dict[str, str]:
    """Every value's type by name, unknown dims renamed in order of first appearance (names
    sorted: the same order on both sides)."""
    raw = {
        v.name: str(v.type)
        for g in model.graphs(functions=False)
        for v in g.values()
        if v.graph is g
    }
    names: dict[str, str] = {}
    out = {}
    for name in sorted(raw):
        out[name] = UNKNOWN.sub(
            lambda m: names.setdefault(m.group(0), f"?{len(names)}"), raw[name]
        )
    return out


def _known(report: Any) -> dict[str, str]:
    return {v.name: UNKNOWN.sub("?", str(k)) for v, k in report.known_values.items()}


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Check every ``again`` against a fresh inference; the ops each one inferred again."""
    counts: list[int] = []
    real = Resumable.again

    def again(self: Resumable, **kw: Any) -> Any:
        model = self.engine.model
        values = [v for g in model.graphs() for v in g.values()]
        declared = [v.type for v in values]  # as the pass left them
        done = self.inferred_again
        report = real(self, **{**kw, "most": float("inf")})  # never the whole model instead
        if report is None:
            return None
        counts.append(self.inferred_again - done)
        incremental = _canonical(model)
        kept = {v: v.type for g in model.graphs() for v in g.values()}
        for value, t in zip(values, declared, strict=True):
            value.type = t
        full = infer(model, verify=False)  # what the pipeline did before Resumable
        assert incremental == _canonical(model)
        assert sorted(map(str, report.errors)) == sorted(map(str, full.errors))
        assert _known(report) == _known(full)
        assert report.typed == full.typed and report.values == full.values
        for value, t in kept.items():
            value.type = t
        return report

    monkeypatch.setattr(Resumable, "again", again)
    return counts


def _optimize(model: Model, *, pin_defaults: bool = False) -> None:
    optimize_model(model, OptimizeOptions(pin_defaults=pin_defaults))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.relative_to(ROOT / "tests").as_posix())
def test_exporter_fixtures(path: Path, checked: list[int]) -> None:
    _optimize(io.load(path))


@pytest.mark.parametrize("name", sorted(p.name for p in ZOO.glob("*.onnx")))
def test_zoo(name: str, checked: list[int]) -> None:
    _optimize(io.load(ZOO / name), pin_defaults=True)  # their weights are listed as inputs


@pytest.mark.parametrize("family", sorted(scale_graphs.FAMILIES))
def test_scale_graphs(family: str, checked: list[int]) -> None:
    _optimize(io.from_proto(scale_graphs.FAMILIES[family](400)))
    if family == "blocks":
        assert checked, "the blocks graph changes: some inference was brought up to date"


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases(name: str, checked: list[int]) -> None:
    model = model_from_text(CASES[name])
    _optimize(model)
    assert checked, "each case is edited by a pass and inferred again after it"


EXPORTS = exported_models(50 << 20)


@pytest.mark.skipif(not EXPORTS, reason="ONNXFORGE_EXPORT_DIR is unset or holds no model")
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_exported(path: Path, checked: list[int]) -> None:
    _optimize(io.load(path))
