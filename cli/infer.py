"""`onnxforge infer MODEL [-o OUT] [--json]`: the shape of every tensor, or why it has none."""

from __future__ import annotations

__all__ = ["infer"]

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.cli._app import (
    Durable,
    ExternalData,
    InPlace,
    Json,
    ModelArg,
    Quiet,
    Strict,
    begin,
    clip,
    command,
    emit_json,
    errors,
    fail_on_errors,
    guard_for,
    load_valid,
    model_name,
    note,
    output_for,
    prepare_output,
    reading,
    report_output,
    session,
    stderr,
    stdout,
    warn_stale,
    writing,
)
from onnxforge.cli._progress import LONG_WRITE, long_graph, progress
from onnxforge.errors import ShapeError
from onnxforge.io import write
from onnxforge.ir import Model, TensorType
from onnxforge.shape_infer import InferReport
from onnxforge.shape_infer import infer as infer_shapes


@command(
    examples=[
        "onnxforge infer model.onnx",
        "onnxforge infer model.onnx -o model.typed.onnx",
        "onnxforge infer model.onnx --json shapes.json --quiet",
        "cat model.onnx | onnxforge infer - -o - > model.typed.onnx",
    ]
)
def infer(
    model: ModelArg,
    *,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            metavar="OUT",
            help="Write the model with every inferred type here: a file (written beside it, "
            "then renamed into place), - for stdout, or a character device or FIFO (written "
            "through). Default: none (a table of values and shapes on stdout).",
            show_default=False,
        ),
    ] = None,
    in_place: InPlace = False,
    durable: Durable = False,
    external_data: ExternalData = None,
    strict: Strict = False,
    as_json: Json = None,
    quiet: Quiet = False,
) -> None:
    """Infer the type and shape of every value of MODEL (symbolic dims as names like N+1).

    With -o, OUT gets every inferred type (graph outputs and value_info); --in-place writes
    them into MODEL itself. Without either (and without --json) a table of values and shapes
    is printed. An inconsistent model lists every error at once (node, op version, input
    shapes, reason) and exits 1 with nothing written.
    """
    name = model_name(model)
    with fail_on_errors(name):
        out = output_for(model, output, in_place)
        json_out = report_output(as_json, out)
        begin(quiet=quiet, report=json_out)
        with writing(out), reading(model) as source:
            # infer sets types only: the nodes are written as the file has them
            loaded = load_valid(source, name, keep_nodes=out is not None)
            location = None
            if out is not None:
                location = prepare_output(
                    loaded, model, out, in_place=in_place, external_data=external_data
                )
            with progress(f"inferring shapes of {name}", expected_long=long_graph(loaded)):
                # load_valid checked every invariant ir.verify would: not twice (0.14 s/100k ops)
                report = infer_shapes(loaded, strict_declared=strict, verify=False)
            if json_out is not None:
                emit_json(_json(name, loaded, report), json_out)
            if out is None and session.tables:
                _print_table(name, loaded)
            warn_stale(name, [str(s) for s in report.stale])
            for line in report.notes:
                note(line)
            for assumption in report.assumptions:
                stderr.print(clip(f"assumed: {assumption}"), markup=False)
            if report.errors:
                for error in report.errors[:MAX_ERRORS]:
                    errors.print(clip(f"{name}: {error}"), markup=False)
                if len(report.errors) > MAX_ERRORS:
                    more = len(report.errors) - MAX_ERRORS
                    errors.print(f"{name}: ... and {more} more shape errors", markup=False)
                raise ShapeError(f"{name}: {len(report.errors)} shape errors; nothing written")
            if out is not None:
                guard = guard_for(source, name)
                guard.culprit = lambda: "infer-shapes"  # the only change infer makes
                weights = sum(
                    v.const.nbytes for v in loaded.graph.initializers if v.const is not None
                )
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
                        guard=guard,
                    )
                if session.tables:
                    stderr.print(
                        clip(
                            f"{name} -> {out.name}: {report.typed} of {report.values} values typed"
                        ),
                        markup=False,
                    )


MAX_ERRORS = 100
"""Shape errors printed at most (the count says how many more)."""


def _values(model: Model) -> list[dict[str, Any]]:
    rows = []
    for graph in model.graphs(functions=False):
        for op in graph.topo_order():
            for value in graph.outputs_of(op):
                if value is None:
                    continue
                t = value.type
                rows.append(
                    {
                        "name": value.name,
                        "graph": graph.name,
                        "op": op.op_type,
                        "dtype": str(t).split("[")[0] if t is not None else None,
                        "shape": list(t.shape)
                        if isinstance(t, TensorType) and t.shape is not None
                        else None,
                    }
                )
    return rows


def _json(name: str, model: Model, report: InferReport) -> dict[str, Any]:
    return {
        "file": name,
        "values": _values(model),
        "typed": report.typed,
        "total": report.values,
        "stale_types": len(report.stale),
        **report.to_json(),
    }


def _print_table(name: str, model: Model) -> None:
    table = Table(
        "value", "op", "type", title=Text(f"{name}: inferred types"), title_justify="left"
    )
    for row in _values(model):
        shape = row["shape"]
        dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
        table.add_row(Text(row["name"]), Text(row["op"]), Text(f"{row['dtype']}[{dims}]"))
    stdout.print(table)
