"""`onnxforge convert MODEL --opset N -o OUT`: bring every node to another opset, up or down."""

from __future__ import annotations

__all__ = ["convert"]

import time
from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.cli._app import (
    AllowCast,
    Durable,
    ExternalData,
    InPlace,
    Json,
    ModelArg,
    OutputOption,
    Quiet,
    Strict,
    begin,
    command,
    emit_json,
    fail_on_errors,
    guard_for,
    load_valid,
    model_name,
    output_for,
    prepare_output,
    reading,
    report_output,
    session,
    stderr,
    warn_stale,
    writing,
)
from onnxforge.cli._progress import LONG_WRITE, PassProgress, long_graph, progress
from onnxforge.errors import AdapterError
from onnxforge.io import write
from onnxforge.passes import PassManager, ReplaceStaleTypesPass
from onnxforge.passes.convert import ConvertOpsetPass, PlannedStep


@command(
    examples=[
        "onnxforge convert model.onnx --opset 18 -o model.op18.onnx",
        "onnxforge convert model.onnx --opset 13 --dry-run",
        "onnxforge convert - --opset 18 -o - < model.onnx > model.op18.onnx",
        "onnxforge convert model.onnx --opset 11 --allow-cast --in-place --json -",
    ]
)
def convert(
    model: ModelArg,
    *,
    opset: Annotated[
        int,
        typer.Option(
            "--opset",
            metavar="N",
            help="The default-domain opset to reach. Required.",
            show_default=False,
        ),
    ],
    output: OutputOption = None,
    in_place: InPlace = False,
    durable: Durable = False,
    external_data: ExternalData = None,
    strict: Strict = False,
    allow_cast: AllowCast = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List what each node needs; write nothing. Default: off.",
            show_default=False,
        ),
    ] = False,
    as_json: Json = None,
    quiet: Quiet = False,
) -> None:
    """Convert MODEL to --opset, one opset step at a time, up or down.

    Each node whose schema changes on a step goes through an adapter, or is kept when it is
    still valid and means the same. A node that cannot be converted blocks: every blocking node
    is listed (op, node name, versions, reason), the exit code is 1 and nothing is written.
    The result's ir_version is the lowest the target opset needs. --dry-run lists each node's
    steps (adapter or "automatic", or the problem) and writes nothing.
    """
    name = model_name(model)
    with fail_on_errors(name):
        if output is None and not dry_run and not in_place:
            raise typer.BadParameter("required unless --dry-run or --in-place", param_hint="'-o'")
        if in_place and dry_run:
            raise typer.BadParameter("--dry-run writes nothing", param_hint="'--in-place'")
        out = None if dry_run else output_for(model, output, in_place)
        json_out = report_output(as_json, out)
        begin(quiet=quiet, report=json_out)
        with writing(out), reading(model) as source:
            loaded = load_valid(source, name)
            location = None
            if out is not None:
                location = prepare_output(
                    loaded, model, out, in_place=in_place, external_data=external_data
                )
            imports = loaded.opset_imports  # an ai.onnx.ml-only model imports no ai.onnx
            source_opset = imports.get("", imports.get("ai.onnx"))
            ir_before = loaded.ir_version
            converter = ConvertOpsetPass(opset, allow_cast=allow_cast)
            start = time.perf_counter()
            stale = ReplaceStaleTypesPass(strict=strict)(loaded).details.get("stale_types", [])
            warn_stale(name, stale)
            report: dict[str, Any] = {
                "file": name,
                "output": None if out is None else out.name,
                "from_opset": source_opset,
                "to_opset": opset,
                "dry_run": dry_run,
                "stale_types": len(stale),
            }
            long = long_graph(loaded)
            if dry_run:
                with progress("planning the conversion", expected_long=long):
                    steps = converter.plan(loaded, apply=True)  # the loaded copy is discarded
                problems = [s for s in steps if s.problem]
                report["seconds"] = round(time.perf_counter() - start, 4)
                report["steps"] = [_step_json(s) for s in steps]
                report["blocking"] = [str(s) for s in problems]
                if json_out is not None:
                    emit_json(report, json_out)
                if session.tables:
                    _print_steps(report, steps)
                if problems:
                    raise AdapterError(
                        f"{name}: cannot convert to opset {opset}; {len(problems)} blocking "
                        "node(s)"
                    )
                return
            assert out is not None
            with progress(f"converting to opset {opset}", expected_long=long) as step:
                PassProgress(step, "converting").before_pass(converter, loaded)
                result = converter(loaded)
            report["seconds"] = round(time.perf_counter() - start, 4)
            weights = sum(v.const.nbytes for v in loaded.graph.initializers if v.const is not None)
            with progress(
                f"writing {out.name}", expected_long=weights >= LONG_WRITE, total=weights
            ) as step:
                write(
                    loaded,
                    out,
                    external_data=external_data,
                    location=location,
                    durable=durable,
                    progress=step.bytes_written if step.shown else None,
                    guard=guard_for(
                        source,
                        name,
                        lambda m, instruments: PassManager(
                            [
                                ReplaceStaleTypesPass(strict=strict),
                                ConvertOpsetPass(opset, allow_cast=allow_cast),
                            ],
                            instruments=instruments,
                        ).run(m),
                    ),
                )
            report["ir_version"] = {"before": ir_before, "after": loaded.ir_version}
            report["stats"] = dict(sorted(result.stats.items()))
        if json_out is not None:
            emit_json(report, json_out)
        if session.tables:
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
        title=Text(
            f"{report['file']}: opset {report['from_opset']} -> {report['to_opset']} (dry run)"
        ),
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
        title=Text(
            f"{report['file']} (opset {report['from_opset']}, IR {ir['before']}) -> "
            f"{report['output']} (opset {report['to_opset']}, IR {ir['after']})"
        ),
        title_justify="left",
    )
    for key, count in report["stats"].items():
        table.add_row(Text(key.removeprefix("adapted.")), str(count))
    stderr.print(table)
    stderr.print(f"{report['seconds']:.3f} s", markup=False)
