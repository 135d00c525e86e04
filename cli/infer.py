"""`onnxforge infer MODEL [-o OUT] [--json]`: the shape of every tensor, or why it has none."""

from __future__ import annotations

__all__ = ["infer"]

import json
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
    clip,
    fail_on_errors,
    in_place_location,
    load_valid,
    output_target,
    stderr,
    stdout,
    warn_stale,
)
from onnxforge.errors import ShapeError
from onnxforge.io import save
from onnxforge.ir import Model, TensorType
from onnxforge.shape_infer import InferReport
from onnxforge.shape_infer import infer as infer_shapes


@app.command()
def infer(
    model: Annotated[Path, typer.Argument(help="The .onnx file to infer.")],
    *,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Write the model with every inferred type here."),
    ] = None,
    in_place: InPlace = False,
    durable: Durable = False,
    strict: Strict = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print values, shapes, assumptions and errors as JSON.")
    ] = False,
) -> None:
    """Infer the type and shape of every value of MODEL (symbolic dims as names like N+1).

    With -o, OUT gets every inferred type (graph outputs and value_info); --in-place writes
    them into MODEL itself. Without either (and without --json) a table of values and shapes
    is printed. An inconsistent model lists every error at once (node, op version, input
    shapes, reason) and exits 1 with nothing written.
    """
    with fail_on_errors(model):
        target = output_target(model, output, in_place)
        loaded = load_valid(model)
        location = in_place_location(loaded, model) if in_place else None
        if target is not None:
            check_output(loaded, target, location or f"{target.name}.data", in_place=in_place)
        with stderr.status("inferring shapes"):
            report = infer_shapes(loaded, strict_declared=strict)
        if as_json:
            stdout.print_json(json.dumps(_json(model, loaded, report)))
        elif target is None:
            _print_table(model, loaded)
        warn_stale(model, [str(s) for s in report.stale])
        for note in report.notes:
            stderr.print(clip(f"note: {note}"), markup=False)
        for assumption in report.assumptions:
            stderr.print(clip(f"assumed: {assumption}"), markup=False)
        if report.errors:
            for error in report.errors[:MAX_ERRORS]:
                stderr.print(clip(f"{model}: {error}"), markup=False)
            if len(report.errors) > MAX_ERRORS:
                more = len(report.errors) - MAX_ERRORS
                stderr.print(f"{model}: ... and {more} more shape errors", markup=False)
            raise ShapeError(f"{model}: {len(report.errors)} shape errors; nothing written")
        if target is not None:
            save(loaded, target, location=location, durable=durable)
            stderr.print(f"{target}: {report.typed} of {report.values} values typed", markup=False)


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


def _json(path: Path, model: Model, report: InferReport) -> dict[str, Any]:
    return {
        "file": str(path),
        "values": _values(model),
        "typed": report.typed,
        "total": report.values,
        "stale_types": len(report.stale),
        **report.to_json(),
    }


def _print_table(path: Path, model: Model) -> None:
    table = Table("value", "op", "type", title=f"{path}: inferred types", title_justify="left")
    for row in _values(model):
        shape = row["shape"]
        dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
        table.add_row(Text(row["name"]), Text(row["op"]), Text(f"{row['dtype']}[{dims}]"))
    stdout.print(table)
