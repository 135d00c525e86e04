"""`onnxforge passes`: every pass --passes and --skip take, what it does, where optimize runs it
and the options that change what it does."""

from __future__ import annotations

__all__ = ["EVERY_PASS", "FIXED_POINT_OPTIONS", "PASS_OPTIONS", "listing", "passes"]

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.api._optimize import OptimizeOptions, pipeline
from onnxforge.cli._app import (
    Json,
    begin,
    command,
    emit_json,
    fail_on_errors,
    report_output,
    session,
    stdout,
)
from onnxforge.passes import PASSES, FixedPoint, fold_pipeline
from onnxforge.toolchains import PROFILES

PASS_OPTIONS: dict[str, tuple[str, ...]] = {
    "replace-stale-types": ("--strict",),
    "infer-shapes": ("--input-shape", "--value-info", "--strict"),
    "convert-opset": ("--opset", "--allow-cast"),
    "fold-constants": ("--fold-limit", "--pin-defaults", "--weights float", "--exclude (fold)"),
    "fuse-dequantize-linear": ("--weights dequantize-linear",),
}
"""The options of optimize (and fold) that change what a pass does, beyond running it."""
_WHEN = {"fuse-dequantize-linear": "--weights"}
"""Passes optimize runs only with an option, beside convert-opset's --opset."""
FIXED_POINT_OPTIONS = ("--max-iterations",)
"""Options of every pass inside the fixed point."""
EVERY_PASS = ("--passes", "--skip", "--verify-each")
"""Options of every pass of optimize: which run, and checking the graph after each."""


def _positions(manager: Any) -> tuple[dict[str, list[int]], set[str], list[dict[str, Any]]]:
    """Each pass's places (from 1) in a PassManager's order, fixed point flattened; the
    names inside the fixed point; the order itself."""
    places: dict[str, list[int]] = {}
    inner: set[str] = set()
    order: list[dict[str, Any]] = []
    for stage in manager.passes:
        group = stage.passes if isinstance(stage, FixedPoint) else [stage]
        for p in group:
            order.append({"pass": p.name, "fixed_point": isinstance(stage, FixedPoint)})
            places.setdefault(p.name, []).append(len(order))
            if isinstance(stage, FixedPoint):
                inner.add(p.name)
    return places, inner, order


def listing() -> dict[str, Any]:
    """Every registered pass (the registry, not a list kept here), with its summary, its
    places in optimize's pipeline and fold's, and the options that affect it."""
    plain, _, _ = _positions(pipeline(OptimizeOptions()))
    every = OptimizeOptions(opset=18, weights="dequantize-linear")
    places, inner, order = _positions(pipeline(every))
    for step in order:
        step["when"] = None if step["pass"] in plain else _WHEN.get(step["pass"], "--opset")
    folding, _, _ = _positions(fold_pipeline())
    rows = []
    last = len(order) + 1
    for name in sorted(PASSES, key=lambda n: (places.get(n, [last])[0], n)):
        options = list(PASS_OPTIONS.get(name, ()))
        if name in inner:
            options += FIXED_POINT_OPTIONS
        rows.append(
            {
                "name": name,
                "summary": PASSES[name].summary,
                "default": name in plain,
                "optimize": places.get(name, []),
                "fixed_point": name in inner,
                "when": None
                if name in plain or name not in places
                else _WHEN.get(name, "--opset"),
                "fold": folding.get(name, []),
                "options": options,
            }
        )
    return {"passes": rows, "optimize": order, "every_pass_options": list(EVERY_PASS)}


@command(
    examples=[
        "onnxforge passes",
        "onnxforge passes --json - | jq -r '.passes[].name'",
        "onnxforge optimize model.onnx -o out.onnx --skip merge-parallel-matmuls",
    ]
)
def passes(
    *,
    toolchain: Annotated[
        str | None,
        typer.Option(
            "--for",
            metavar="TOOLCHAIN",
            help=f"Also say what optimize --for TOOLCHAIN changes ({', '.join(PROFILES)}). "
            "Default: the passes only.",
            show_default=False,
        ),
    ] = None,
    as_json: Json = None,
) -> None:
    """List every pass: its name (what --passes and --skip take), what it does, where optimize
    runs it and the options that change it.

    The order column is the pass's place in optimize's pipeline (a pass can run twice);
    passes marked "fixed point" repeat, in that order, until none changes the model (at most
    --max-iterations rounds); convert-opset runs only with --opset. fold runs
    replace-stale-types, fold-constants and eliminate-dead-code. With --for, what that
    toolchain's profile adds comes first.
    """
    with fail_on_errors():
        if toolchain is not None and toolchain not in PROFILES:
            raise typer.BadParameter(
                f"no such toolchain (one of {', '.join(PROFILES)})", param_hint="'--for'"
            )
        json_out = report_output(as_json)
        begin(report=json_out)
        data = listing()
        if toolchain is not None:
            chosen = PROFILES[toolchain]
            data["toolchain"] = {
                "name": chosen.name,
                "summary": chosen.summary,
                "changes": chosen.changes(),
            }
        if json_out is not None:
            emit_json(data, json_out)
        if session.tables:
            _print(data)


def _order(row: dict[str, Any]) -> str:
    if not row["optimize"]:
        return "-"
    text = ", ".join(map(str, row["optimize"]))
    if row["fixed_point"]:
        text += " (fixed point)"
    if row["when"]:
        text += f" (with {row['when']})"
    return text


def _print(data: dict[str, Any]) -> None:
    if "toolchain" in data:
        profile = data["toolchain"]
        stdout.print(Text(f"optimize --for {profile['name']}: {profile['summary']}"))
        for line in profile["changes"]:
            stdout.print(Text(f"  - {line}"))
    table = Table(title="passes (onnxforge optimize --passes/--skip)", title_justify="left")
    table.add_column("pass", no_wrap=True)
    table.add_column("order", no_wrap=True)
    table.add_column("what it does", ratio=3)
    table.add_column("options", ratio=2)
    for row in data["passes"]:
        table.add_row(
            row["name"],
            _order(row),
            Text(row["summary"]),
            Text(", ".join(row["options"]) or "-"),
        )
    stdout.print(table)
    stdout.print(
        Text(
            f"Every pass: {', '.join(data['every_pass_options'])}. "
            "fold: replace-stale-types, fold-constants, eliminate-dead-code."
        )
    )
