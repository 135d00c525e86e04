"""`onnxforge check MODEL...`: the pre-deployment gate, for people, CI logs and GitHub Actions."""

from __future__ import annotations

__all__ = ["check"]

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from onnxforge._check import Problem, require_runtime
from onnxforge._check import check as check_model
from onnxforge.cli._app import app, clip, error_lines, fail_on_errors, stderr, stdout
from onnxforge.errors import OnnxForgeError


class Runtime(str, enum.Enum):
    onnxruntime = "onnxruntime"


class VerifyRuntime(str, enum.Enum):
    onnxruntime = "onnxruntime"
    openvino = "openvino"


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    github = "github"


def _input_shapes(specs: list[str]) -> dict[str, list[int]]:
    shapes: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        try:
            parsed = [int(d) for d in dims.split(",")] if dims else []
        except ValueError:
            parsed = None
        if not sep or not name or parsed is None or any(d < 0 for d in parsed):
            raise typer.BadParameter(
                f"{spec!r} is not NAME=D1,D2,... (e.g. input=1,3,224,224)",
                param_hint="--input-shape",
            )
        shapes[name] = parsed
    return shapes


@app.command()
def check(
    models: Annotated[list[Path], typer.Argument(help="The .onnx files to check.")],
    *,
    runtime: Annotated[
        Runtime | None,
        typer.Option(
            help="Hold the models to the opsets and IR version this installed runtime "
            "accepts, and allow its own domain (com.microsoft)."
        ),
    ] = None,
    max_opset: Annotated[
        int | None, typer.Option(help="The newest ai.onnx opset the target runtime supports.")
    ] = None,
    max_ir: Annotated[
        int | None, typer.Option(help="The newest IR version the target runtime supports.")
    ] = None,
    verify: Annotated[
        list[VerifyRuntime] | None,
        typer.Option(
            help="Load and run each model once in this runtime (repeatable; openvino "
            "needs onnxforge\\[openvino]). Runs only on models that pass the other checks."
        ),
    ] = None,
    input_shape: Annotated[
        list[str] | None,
        typer.Option(
            help="Shape of an input for --verify, NAME=1,3,224,224 (repeatable); "
            "other symbolic dims are 1."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (same as --format json).")
    ] = False,
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            help="text: one line per problem; json; github: GitHub "
            "Actions annotations (::error file=...).",
        ),
    ] = OutputFormat.text,
) -> None:
    """Check MODELs before they ship: onnx's checker, the graph, strict shape inference, the
    opsets and IR version a runtime supports, Split-18 sizes, custom domains, and optionally a
    run in onnxruntime or OpenVINO.

    Every model is checked; each problem is one line: file, node, problem.

    Exit 0: all clean; 1: a model has problems; 2: a model cannot be read,
    or a runtime asked for is not installed. The worst wins.
    """
    fmt = OutputFormat.json if as_json else output_format
    if as_json and output_format not in (OutputFormat.text, OutputFormat.json):
        raise typer.BadParameter(
            "--json and --format github exclude each other", param_hint="--json"
        )
    shapes = _input_shapes(input_shape or [])
    runtimes = [r.value for r in verify or []]
    with fail_on_errors():
        for name in runtimes + ([runtime.value] if runtime is not None else []):
            require_runtime(name)
    results: list[dict[str, Any]] = []
    worst = 0
    for model in models:
        entry: dict[str, Any] = {"file": str(model), "status": "ok", "problems": [], "error": None}
        try:
            found = check_model(
                model,
                runtime=runtime.value if runtime is not None else None,
                max_opset=max_opset,
                max_ir=max_ir,
                verify=runtimes,
                input_shapes=shapes,
            )
        except OnnxForgeError as exc:
            entry["error"] = str(exc)
            entry["status"] = "unreadable" if exc.exit_code == 2 else "failed"
            worst = max(worst, exc.exit_code)
            _report_error(fmt, model, exc)
        else:
            entry["problems"] = found
            entry["status"] = "problems" if found else "ok"
            if found:
                worst = max(worst, 1)
            _report(fmt, found)
            if found and runtimes and not any(p.code == "verify" for p in found):
                names = " and ".join(runtimes)
                stderr.print(
                    f"note: {model}: not run on {names}: fix the problems above first",
                    markup=False,
                )
        results.append(entry)
    if fmt is OutputFormat.json:
        _print_json(results, worst)
    else:
        _summary(results)
    raise typer.Exit(code=worst)


def _report(fmt: OutputFormat, found: list[Problem]) -> None:
    for problem in found:
        if fmt is OutputFormat.text:
            stdout.print(clip(str(problem)), markup=False, emoji=False)
        elif fmt is OutputFormat.github:
            message = f"{problem.node}: {problem.message}" if problem.node else problem.message
            stdout.print(
                _annotation(problem.file, problem.code, clip(message)), markup=False, emoji=False
            )


def _report_error(fmt: OutputFormat, model: Path, exc: OnnxForgeError) -> None:
    if fmt is OutputFormat.github:
        kind = "unreadable" if exc.exit_code == 2 else "error"
        stdout.print(_annotation(str(model), kind, clip(str(exc))), markup=False, emoji=False)
    if fmt is not OutputFormat.json:
        for line in error_lines(exc, model):
            stderr.print(f"error: {line}", markup=False, emoji=False)


def _escape(text: str, *, property_value: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _annotation(file: str, code: str, message: str) -> str:
    file_value = _escape(file, property_value=True)
    title = _escape(f"onnxforge check: {code}", property_value=True)
    return f"::error file={file_value},title={title}::{_escape(message)}"


def _print_json(results: list[dict[str, Any]], worst: int) -> None:
    files = [
        {
            **entry,
            "error": None if entry["error"] is None else clip(entry["error"]),
            "problems": [{**p.to_json(), "message": clip(p.message)} for p in entry["problems"]],
        }
        for entry in results
    ]
    report = {
        "files": files,
        "problems": sum(len(entry["problems"]) for entry in results),
        "exit_code": worst,
    }
    stdout.print_json(json.dumps(report))


def _summary(results: list[dict[str, Any]]) -> None:
    problems = sum(len(entry["problems"]) for entry in results)
    with_problems = sum(1 for entry in results if entry["problems"])
    unreadable = sum(1 for entry in results if entry["status"] == "unreadable")
    failed = sum(1 for entry in results if entry["status"] == "failed")
    files = f"{len(results)} file{'s' if len(results) != 1 else ''} checked"
    parts = []
    if problems:
        parts.append(
            f"{problems} problem{'s' if problems != 1 else ''} in {with_problems} "
            f"file{'s' if with_problems != 1 else ''}"
        )
    if unreadable:
        parts.append(f"{unreadable} unreadable")
    if failed:
        parts.append(f"{failed} could not be checked")
    stderr.print(f"{files}: {', '.join(parts) or 'no problems'}", markup=False, emoji=False)
