"""`onnxforge convert MODEL --opset N -o OUT`: bring every node to another opset, up or down."""

from __future__ import annotations

__all__ = ["convert"]

import json
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.cli._app import (
    Durable,
    InPlace,
    Strict,
    app,
    check_output,
    fail_on_errors,
    in_place_location,
    load_valid,
    output_target,
    stderr,
    stdout,
    warn_stale,
)
from onnxforge.errors import AdapterError
from onnxforge.io import save
from onnxforge.passes import ReplaceStaleTypesPass
from onnxforge.passes.convert import ConvertOpsetPass, PlannedStep


@app.command()
def convert(
    model: Annotated[Path, typer.Argument(help="The .onnx file to convert.")],
    *,
    opset: Annotated[int, typer.Option("--opset", help="The default-domain opset to reach.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write the result.")
    ] = None,
    in_place: InPlace = False,
    durable: Durable = False,
    strict: Strict = False,
    allow_cast: Annotated[
        bool,
        typer.Option(
            "--allow-cast",
            help="Where the target version lacks an element type, compute in a wider one "
            "(a Cast pair around the node) instead of refusing.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="List what each node needs; write nothing."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Convert MODEL to --opset, one opset step at a time, up or down.

    Each node whose schema changes on a step goes through an adapter, or is kept when it is
    still valid and means the same. A node that cannot be converted blocks: every blocking node
    is listed (op, node name, versions, reason), the exit code is 1 and nothing is written.
    The result's ir_version is the lowest the target opset needs. --dry-run lists each node's
    steps (adapter or "automatic", or the problem) and writes nothing.
    """
    with fail_on_errors(model):
        if output is None and not dry_run and not in_place:
            raise typer.BadParameter("required unless --dry-run or --in-place", param_hint="'-o'")
        if in_place and dry_run:
            raise typer.BadParameter("--dry-run writes nothing", param_hint="'--in-place'")
        target = output_target(model, output, in_place)
        loaded = load_valid(model)
        location = in_place_location(loaded, model) if in_place else None
        if target is not None and not dry_run:
            check_output(loaded, target, location or f"{target.name}.data", in_place=in_place)
        source = loaded.opset()
        ir_before = loaded.ir_version
        converter = ConvertOpsetPass(opset, allow_cast=allow_cast)
        start = time.perf_counter()
        stale = ReplaceStaleTypesPass(strict=strict)(loaded).details.get("stale_types", [])
        warn_stale(model, stale)
        report: dict[str, Any] = {
            "file": str(model),
            "output": None if dry_run else str(target),
            "from_opset": source,
            "to_opset": opset,
            "dry_run": dry_run,
            "stale_types": len(stale),
        }
        if dry_run:
            with stderr.status("planning the conversion"):
                steps = converter.plan(loaded, apply=True)  # the loaded copy is discarded
            problems = [s for s in steps if s.problem]
            report["seconds"] = round(time.perf_counter() - start, 4)
            report["steps"] = [_step_json(s) for s in steps]
            report["blocking"] = [str(s) for s in problems]
            if as_json:
                stdout.print_json(json.dumps(report))
            else:
                _print_steps(report, steps)
            if problems:
                raise AdapterError(
                    f"{model}: cannot convert to opset {opset}; {len(problems)} blocking node(s)"
                )
            return
        assert target is not None
        with stderr.status(f"converting to opset {opset}"):
            result = converter(loaded)
        report["seconds"] = round(time.perf_counter() - start, 4)
        save(loaded, target, location=location, durable=durable)
        report["ir_version"] = {"before": ir_before, "after": loaded.ir_version}
        report["stats"] = dict(sorted(result.stats.items()))
        if as_json:
            stdout.print_json(json.dumps(report))
        else:
            _print_summary(report)


def _step_json(step: PlannedStep) -> dict[str, Any]:
    return {
        "where": step.where,
        "node": step.node,
        "op": step.op_type,
        "from": step.from_opset,
        "to": step.to_opset,
        "how": step.how,
        "problem": step.problem,
    }


def _print_steps(report: dict[str, Any], steps: list[PlannedStep]) -> None:
    table = Table(
        "node",
        "op",
        "step",
        "how",
        title=f"{report['file']}: opset {report['from_opset']} -> {report['to_opset']} (dry run)",
        title_justify="left",
    )
    for s in steps:
        node = f"{s.where}: {s.node}" if s.where else s.node
        how = Text(s.problem, style="red") if s.problem else Text(s.how)
        table.add_row(Text(node), s.op_type, f"{s.from_opset} -> {s.to_opset}", how)
    stderr.print(table)
    counts = Counter("blocked" if s.problem else s.how for s in steps)
    summary = ", ".join(f"{how}: {n}" for how, n in sorted(counts.items())) or "no node changes"
    stderr.print(summary, markup=False)


def _print_summary(report: dict[str, Any]) -> None:
    ir = report["ir_version"]
    table = Table(
        "how",
        "node steps",
        title=f"{report['file']} (opset {report['from_opset']}, IR {ir['before']}) -> "
        f"{report['output']} (opset {report['to_opset']}, IR {ir['after']})",
        title_justify="left",
    )
    for key, count in report["stats"].items():
        table.add_row(Text(key.removeprefix("adapted.")), str(count))
    stderr.print(table)
    stderr.print(f"{report['seconds']:.3f} s", markup=False)
