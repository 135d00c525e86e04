"""`onnxforge check MODEL...`: the pre-deployment gate, for people, CI logs and GitHub Actions."""

from __future__ import annotations

__all__ = ["check"]

import dataclasses
import enum
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from onnxforge.api._check import SEVERITIES, onnxruntime_limits, require_runtime
from onnxforge.api._check_pool import FileResult, check_files, check_one
from onnxforge.cli._app import (
    Json,
    Quiet,
    begin,
    clip,
    command,
    emit_json,
    error_lines,
    errors,
    fail_on_errors,
    reading,
    report_output,
    stderr,
    stdout,
)
from onnxforge.cli._check_config import CheckConfig, find_config, load_config
from onnxforge.cli._progress import progress
from onnxforge.cli._sarif import sarif
from onnxforge.errors import OnnxForgeError
from onnxforge.io import STDIN_NAME, STDIO, Output


class Runtime(str, enum.Enum):
    onnxruntime = "onnxruntime"


class VerifyRuntime(str, enum.Enum):
    onnxruntime = "onnxruntime"
    openvino = "openvino"


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"


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


FailOn = enum.Enum("FailOn", {s: s for s in SEVERITIES}, type=str)  # type: ignore[misc]


@command(
    examples=[
        "onnxforge check models/*.onnx --runtime onnxruntime --verify onnxruntime",
        "onnxforge check model.onnx --max-opset 17 --max-ir 8 --fail-on warning",
        "onnxforge check models/*.onnx --format github --jobs 4 --timeout 120",
        "onnxforge check models/*.onnx --format sarif > onnxforge.sarif",
        "onnxforge convert model.onnx --opset 17 -o - | onnxforge check - --json -",
    ]
)
def check(
    models: Annotated[
        list[Path],
        typer.Argument(
            metavar="MODEL...",
            help="The ONNX model files; - reads one from stdin.",
            show_default=False,
        ),
    ],
    *,
    runtime: Annotated[
        Runtime | None,
        typer.Option(
            help="Hold the models to the opsets and IR version this installed runtime "
            "accepts, and allow its own domain (com.microsoft). Default: no runtime.",
            show_default=False,
        ),
    ] = None,
    max_opset: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="The newest ai.onnx opset the target runtime supports. Default: no limit.",
            show_default=False,
        ),
    ] = None,
    max_ir: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="The newest IR version the target runtime supports. Default: no limit.",
            show_default=False,
        ),
    ] = None,
    verify: Annotated[
        list[VerifyRuntime] | None,
        typer.Option(
            help="Load and run each model in this runtime (repeatable; openvino needs "
            "onnxforge\\[openvino]). Symbolic dims take the sizes 1, 2, 4, ... 640 in turn "
            "until one runs, then batch 1 with each larger size. Runs only on models without "
            "errors. Default: no run.",
            show_default=False,
        ),
    ] = None,
    input_shape: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=1,3,224,224",
            help="Shape of an input for --verify (repeatable); other inputs' symbolic dims "
            "are chosen. Default: chosen for every input.",
            show_default=False,
        ),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE.npz",
            help="Arrays by input name for --verify, fed as they are (inputs that must hold "
            "particular values: lengths, ids, durations); inputs it leaves out are made as "
            "usual. Default: every input made.",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        FailOn | None,  # type: ignore[valid-type]
        typer.Option(
            help="The least severity that fails the run. Default: error.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Models checked at once, each in its own process. Default: the number of cores.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SEC",
            help="Seconds one model may take before it is stopped. Default: 600.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A pyproject.toml whose \\[tool.onnxforge.check] sets the defaults. Default: "
            "the nearest one from the current folder up.",
            show_default=False,
        ),
    ] = None,
    as_json: Json = None,
    output_format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            help="text: one line per problem; json (as --json); github: GitHub Actions "
            "annotations (::error/::warning file=...); sarif: SARIF 2.1.0 for code scanning. "
            "Default: text.",
            show_default=False,
        ),
    ] = None,
    quiet: Quiet = False,
) -> None:
    """Check MODELs before they ship: onnx's checker, the graph, strict shape inference, the
    opsets and IR version a runtime supports, Split-18 sizes, custom domains, and optionally a
    run in onnxruntime or OpenVINO.

    Every problem is an error (the model cannot load or run on the target) or a warning (it
    runs, but a consumer could trip: stale declared shapes, negative dims, unused inputs,
    duplicated initializers, shadowed names). Each is one line: file, node, problem, code and
    severity. \\[tool.onnxforge.check] in pyproject.toml sets defaults; the command line wins.
    With --quiet only the problems that fail the run are printed.

    Exit 0: nothing at or above --fail-on; 1: a model has such problems or could not be
    checked; 2: a model cannot be read, the configuration is wrong, or a runtime asked for is
    not installed. The worst wins.
    """
    with fail_on_errors():
        json_out = report_output(as_json)
        begin(quiet=quiet, report=json_out)
        settings = _settings(config)
        fmt = _format(json_out, output_format, settings.format)
        runtime_name = runtime.value if runtime is not None else settings.runtime
        runtimes = [r.value for r in verify] if verify else list(settings.verify or [])
        fail_level = fail_on.value if fail_on is not None else settings.fail_on or "error"
        given_shapes = _input_shapes(input_shape or [])
        if sum(os.fspath(m) == STDIO for m in models) > 1:
            raise typer.BadParameter("- (stdin) can be read once", param_hint="MODEL")
        for name in runtimes + ([runtime_name] if runtime_name is not None else []):
            require_runtime(name)
        if runtime_name == "onnxruntime":
            onnxruntime_limits()  # probed once here; the workers inherit it
        options = {
            "runtime": runtime_name,
            "max_opset": max_opset if max_opset is not None else settings.max_opset,
            "max_ir": max_ir if max_ir is not None else settings.max_ir,
            "verify": runtimes,
            "inputs": None if inputs is None else os.fspath(inputs),
        }
        per_file = []
        for model in models:
            shapes, ignored = settings.for_file(str(model))
            per_file.append(({**options, "input_shapes": {**shapes, **given_shapes}}, ignored))
        workers = jobs if jobs is not None else settings.jobs or os.cpu_count() or 1
        seconds = timeout if timeout is not None else settings.timeout or DEFAULT_TIMEOUT
        if workers < 1 or seconds <= 0:
            raise typer.BadParameter("--jobs and --timeout must be positive")
        stdin = next((i for i, m in enumerate(models) if os.fspath(m) == STDIO), None)
        if stdin is None:
            results = _run(models, per_file, workers, seconds)
        else:
            with reading(models[stdin]) as copy:
                files = [copy if i == stdin else m for i, m in enumerate(models)]
                results = _run(files, per_file, workers, seconds)
            results[stdin] = _renamed(results[stdin], str(copy), STDIN_NAME)
    worst = 0
    for result, (_, ignored) in zip(results, per_file, strict=True):
        result.problems = [p for p in result.problems if p.code not in ignored]
        if result.error is not None:
            worst = max(worst, result.exit_code)
        elif any(p.fails(fail_level) for p in result.problems):
            worst = max(worst, 1)
    if json_out is not None and json_out.kind != "stdout":
        _print_json(results, worst, fail_level, json_out)
    if fmt is OutputFormat.json:
        _print_json(results, worst, fail_level, Output.at(STDIO))
    elif fmt is OutputFormat.sarif:
        stdout.print_json(json.dumps(sarif(results)))
    else:
        for result in results:
            _report(fmt, result, runtimes, fail_level if quiet else None)
        _summary(results, fail_level)
    raise typer.Exit(code=worst)


def _renamed(result: FileResult, path: str, name: str) -> FileResult:
    """The result of checking stdin's temporary copy, as if it named stdin."""
    result.file = name
    result.problems = [
        dataclasses.replace(p, file=name, message=p.message.replace(path, name))
        if p.file == path or path in p.message
        else p
        for p in result.problems
    ]
    if result.error is not None:
        result.error = result.error.replace(path, name)
    return result


DEFAULT_TIMEOUT = 600.0


def _settings(path: Path | None) -> CheckConfig:
    if path is not None:
        return load_config(path)
    found = find_config()
    return load_config(found) if found is not None else CheckConfig()


def _format(
    report: Output | None, given: OutputFormat | None, configured: str | None
) -> OutputFormat:
    """What goes to stdout: --format, the configured one, or text; JSON when --json asks for
    stdout (--json FILE writes the report there and leaves stdout to --format)."""
    on_stdout = report is not None and report.kind == "stdout"
    if on_stdout and given not in (None, OutputFormat.json):
        raise typer.BadParameter(f"--json and --format {given.value} exclude each other")  # type: ignore[union-attr]
    if on_stdout:
        return OutputFormat.json
    return given or (OutputFormat(configured) if configured else OutputFormat.text)


def _run(
    models: list[Path], per_file: list[tuple[dict[str, Any], set[str]]], jobs: int, timeout: float
) -> list[FileResult]:
    """One model is checked in this process (a runtime crash is already contained by the
    --verify child); several in worker processes, with a progress bar on a terminal."""
    if len(models) == 1 and timeout == DEFAULT_TIMEOUT:
        return [check_one(str(models[0]), per_file[0][0])]
    with progress("checking", expected_long=len(models) > 1, total=len(models)) as step:
        return check_files(
            [str(m) for m in models],
            [options for options, _ in per_file],
            jobs=min(jobs, len(models)),
            timeout=timeout,
            on_done=lambda result: step.advance(),
        )


def _report(
    fmt: OutputFormat, result: FileResult, runtimes: list[str], only: str | None = None
) -> None:
    """A file's problems on stdout (``only``: those that fail at this severity, --quiet),
    its error and notes on stderr."""
    model = Path(result.file)
    if result.error is not None:
        exc = OnnxForgeError(result.error)
        exc.exit_code = result.exit_code
        if fmt is OutputFormat.github:
            kind = "unreadable" if result.exit_code == 2 else "error"
            stdout.print(
                _annotation("error", result.file, kind, clip(result.error)),
                markup=False,
                emoji=False,
            )
        for line in error_lines(exc, model):
            errors.print(f"error: {line}", markup=False, emoji=False)
        return
    for problem in result.problems:
        if only is not None and not problem.fails(only):
            continue
        if fmt is OutputFormat.text:
            stdout.print(clip(str(problem)), markup=False, emoji=False)
        else:
            message = f"{problem.node}: {problem.message}" if problem.node else problem.message
            stdout.print(
                _annotation(problem.severity, problem.file, problem.code, clip(message)),
                markup=False,
                emoji=False,
            )
    failing = [p for p in result.problems if p.severity == "error"]
    if failing and runtimes and not any(p.code == "verify" for p in failing):
        names = " and ".join(runtimes)
        stderr.print(
            f"note: {model}: not run on {names}: fix the errors above first",
            markup=False,
        )
    for name, shapes in result.ran_with.items():
        shown = ", ".join(f"{k}={v}" for k, v in shapes.items())
        stderr.print(clip(f"note: {model}: ran on {name} with {shown}"), markup=False)


def _escape(text: str, *, property_value: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _annotation(severity: str, file: str, code: str, message: str) -> str:
    file_value = _escape(file, property_value=True)
    title = _escape(f"onnxforge check: {code}", property_value=True)
    return f"::{severity} file={file_value},title={title}::{_escape(message)}"


def _print_json(results: list[FileResult], worst: int, fail_on: str, report: Output) -> None:
    files = [
        {
            "file": r.file,
            "status": r.status,
            "problems": [{**p.to_json(), "message": clip(p.message)} for p in r.problems],
            "error": None if r.error is None else clip(r.error),
            "ran_with": r.ran_with,
        }
        for r in results
    ]
    problems = [p for r in results for p in r.problems]
    data = {
        "files": files,
        "problems": len(problems),
        "errors": sum(p.severity == "error" for p in problems),
        "warnings": sum(p.severity == "warning" for p in problems),
        "fail_on": fail_on,
        "exit_code": worst,
    }
    emit_json(data, report)


def _summary(results: list[FileResult], fail_on: str) -> None:
    def count(n: int, word: str) -> str:
        return f"{n} {word}{'s' if n != 1 else ''}"

    errors = sum(p.severity == "error" for r in results for p in r.problems)
    warnings = sum(p.severity == "warning" for r in results for p in r.problems)
    unreadable = sum(1 for r in results if r.status == "unreadable")
    failed = sum(1 for r in results if r.status == "failed")
    parts = []
    if errors or warnings:
        with_problems = sum(1 for r in results if r.problems)
        found = ", ".join(
            part
            for part in (
                errors and count(errors, "error"),
                warnings and count(warnings, "warning"),
            )
            if part
        )
        parts.append(f"{found} in {count(with_problems, 'file')}")
    if unreadable:
        parts.append(f"{unreadable} unreadable")
    if failed:
        parts.append(f"{failed} could not be checked")
    if warnings and fail_on == "error" and not errors:
        parts.append("warnings do not fail the run (--fail-on warning makes them)")
    files = f"{count(len(results), 'file')} checked"
    stderr.print(f"{files}: {'; '.join(parts) or 'no problems'}", markup=False, emoji=False)
