"""`onnxforge info MODEL`: what a model is made of, as a table or JSON."""

from __future__ import annotations

__all__ = ["info"]

from typing import Any

from rich.table import Table
from rich.text import Text

from onnxforge._validate import model_problems, text_problem
from onnxforge.cli._app import (
    Json,
    ModelArg,
    Quiet,
    begin,
    command,
    emit_json,
    fail_on_errors,
    model_name,
    reading,
    report_output,
    session,
    stdout,
)
from onnxforge.errors import InvalidModelError
from onnxforge.io import STDIN_NAME, load
from onnxforge.summary import summarize


@command(
    examples=[
        "onnxforge info model.onnx",
        "onnxforge info model.onnx --json - | jq .op_types",
        "onnxforge convert model.onnx --opset 18 -o - | onnxforge info -",
        "onnxforge info model.onnx --quiet && echo valid",
    ]
)
def info(model: ModelArg, *, as_json: Json = None, quiet: Quiet = False) -> None:
    """Describe MODEL: opsets, IR version, producer, ops, inputs/outputs, weights.

    Exit 0 for a valid model, 1 when it reads but is invalid (the graph's invariants, ops
    against their schemas, element types, tensor data against its dims; each problem on its
    own line on stderr), 2 when it cannot be read. The tables go to stdout.
    """
    name = model_name(model)
    with fail_on_errors(name):
        json_out = report_output(as_json)
        begin(quiet=quiet, report=json_out)
        with reading(model) as source:
            loaded = load(source, name=name if name == STDIN_NAME else None)
            unreadable = text_problem(loaded)
            if unreadable is not None:
                raise InvalidModelError([unreadable], where=name)
            found = model_problems(loaded)
            summary = summarize(loaded)
        if json_out is not None:
            emit_json({"file": name, **summary, "problems": found}, json_out)
        if session.tables:
            _print_tables(name, summary)
        if found:
            raise InvalidModelError(found, where=name)


def _shape(entry: dict[str, Any]) -> str:
    shape = entry["shape"]
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _print_tables(name: str, s: dict[str, Any]) -> None:
    opsets = ", ".join(f"{d} {v}" for d, v in s["opset_imports"].items())
    producer = " ".join(p for p in (s["producer"]["name"], s["producer"]["version"]) if p) or "-"
    overview = Table(title=Text(name), show_header=False, title_justify="left")
    for key, value in (
        ("IR version", s["ir_version"]),
        ("opsets", opsets or "-"),
        ("producer", producer),
        ("nodes", f"{s['nodes']} ({s['nodes_total']} with subgraphs)"),
        ("initializers", f"{s['initializers']} ({_bytes(s['initializer_bytes'])})"),
        ("subgraphs", s["subgraphs"]),
        ("functions", s["functions"]),
    ):
        overview.add_row(key, Text(str(value)))
    stdout.print(overview)
    io_table = Table(
        "", "name", "dtype", "shape", title="inputs and outputs", title_justify="left"
    )
    for kind in ("inputs", "outputs"):
        for entry in s[kind]:
            cells = (kind[:-1], entry["name"], entry["dtype"] or "?", _shape(entry))
            io_table.add_row(*map(Text, cells))  # Text: names and shapes may hold [brackets]
    stdout.print(io_table)
    ops = Table("op", "count", title="ops", title_justify="left")
    for op_type, count in s["op_types"].items():
        ops.add_row(Text(op_type), str(count))
    stdout.print(ops)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)
