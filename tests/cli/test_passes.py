"""`onnxforge passes` against the pass registry: every registered pass is listed, in table and
JSON, with its summary, its place in optimize's pipeline and the options that change it."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from onnxforge.api._optimize import OptimizeOptions, pipeline
from onnxforge.cli import app
from onnxforge.cli.passes import PASS_OPTIONS
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import Model
from onnxforge.passes import PASSES, FixedPoint, Pass, PassResult, register_pass

runner = CliRunner()


def _listed() -> dict:
    result = runner.invoke(app, ["passes", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_json_lists_every_registered_pass_with_its_summary() -> None:
    data = _listed()
    rows = {row["name"]: row for row in data["passes"]}
    assert set(rows) == set(PASSES)
    for name, cls in PASSES.items():
        assert rows[name]["summary"] == cls.summary != ""
        assert "\n" not in cls.summary
    assert set(PASS_OPTIONS) <= set(PASSES)  # no options kept for a pass that is gone


def test_the_order_is_optimizes_pipeline_fixed_point_flattened() -> None:
    manager = pipeline(OptimizeOptions(opset=18, weights="dequantize-linear"))
    want = []
    for stage in manager.passes:
        inner = isinstance(stage, FixedPoint)
        want += [(p.name, inner) for p in (stage.passes if inner else [stage])]
    data = _listed()
    assert [(s["pass"], s["fixed_point"]) for s in data["optimize"]] == want
    rows = {row["name"]: row for row in data["passes"]}
    for place, (name, _) in enumerate(want, start=1):
        assert place in rows[name]["optimize"]
    assert rows["infer-shapes"]["optimize"] == [2, len(want)]  # first and last
    assert rows["convert-opset"]["default"] is False and rows["convert-opset"]["when"] == "--opset"
    dequantize = rows["fuse-dequantize-linear"]
    assert dequantize["default"] is False and dequantize["when"] == "--weights"
    optional = ("convert-opset", "fuse-dequantize-linear", "convert-precision")
    assert all(row["default"] for n, row in rows.items() if n not in optional)
    fold = rows["fold-constants"]
    assert fold["fixed_point"] and "--fold-limit" in fold["options"]
    assert rows["fold-constants"]["fold"] == [2] and rows["eliminate-dead-code"]["fold"] == [3]


def test_the_table_names_every_pass() -> None:
    result = runner.invoke(app, ["passes"])
    assert result.exit_code == 0, result.output
    for name in PASSES:
        assert name in result.stdout
    assert "fixed point" in result.stdout and "with --opset" in result.stdout


def test_a_new_pass_is_listed_without_being_named_anywhere_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class _Newcomer(Pass):
        name: ClassVar[str] = "test-newcomer"
        summary: ClassVar[str] = "Does nothing, for this test."

        def call(self, model: Model) -> PassResult:
            return PassResult(model)

    monkeypatch.setitem(PASSES, _Newcomer.name, _Newcomer)
    rows = {row["name"]: row for row in _listed()["passes"]}
    assert rows["test-newcomer"]["summary"] == "Does nothing, for this test."
    assert rows["test-newcomer"]["optimize"] == [] and not rows["test-newcomer"]["default"]
    table = runner.invoke(app, ["passes"])
    assert "test-newcomer" in table.stdout


def test_a_pass_without_a_one_line_summary_cannot_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("onnxforge.passes._infra.PASSES", dict(PASSES))

    class _Silent(Pass):
        name: ClassVar[str] = "test-silent"

        def call(self, model: Model) -> PassResult:
            return PassResult(model)

    with pytest.raises(OnnxForgeError, match="one-line summary"):
        register_pass(_Silent)
