"""The Typer app and the error handling every command shares."""

from __future__ import annotations

__all__ = [
    "MAX_LINE",
    "Durable",
    "InPlace",
    "PIN_DEFAULTS_HELP",
    "Strict",
    "app",
    "check_output",
    "clip",
    "error_lines",
    "fail_on_errors",
    "in_place_location",
    "load_valid",
    "output_target",
    "refuse_shape_errors",
    "stderr",
    "stdout",
    "warn_stale",
]

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from onnxforge._validate import validate
from onnxforge.errors import InvalidModelError, OnnxForgeError
from onnxforge.io import data_files, load
from onnxforge.ir import Model

PIN_DEFAULTS_HELP = (
    "Treat initializers listed as graph inputs (every one in IR < 4 models) as constants, so "
    "they fold: they stop being inputs a caller may override, and ir_version becomes 4. "
    "onnxsim and onnxslim do this without asking."
)
"""fold's and optimize's --pin-defaults."""

InPlace = Annotated[
    bool, typer.Option("--in-place", help="Write the result over MODEL (atomically).")
]
"""--in-place, on every command that writes a model."""
Durable = Annotated[
    bool,
    typer.Option(
        "--durable",
        help="Flush the output to disk before renaming it into place, so a power cut cannot "
        "leave it empty (about 1 ms per small file, seconds per GiB).",
    ),
]
"""--durable, on every command that writes a model."""
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse a model whose declared shapes (value_info, outputs) contradict what its "
        "graph computes, instead of replacing them with a warning.",
    ),
]
"""--strict, on infer, fold, convert and optimize."""

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Make ONNX models ready to ship: shapes, opset conversion, folding, cleanup.",
)
stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
MAX_LINE = 1000
"""Characters of one message line at most (a million-entry attribute quoted in full is no
clear message)."""


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, 0x85) if c != 0x09} | {
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def clip(line: str) -> str:
    """``line`` as one printable line: control characters (a newline inside a name from a
    hostile file) escaped, cut to MAX_LINE characters with a count of what was cut."""
    line = line.translate(_CONTROL)
    if len(line) <= MAX_LINE:
        return line
    return f"{line[:MAX_LINE]} ... ({len(line) - MAX_LINE} more characters)"


def error_lines(exc: OnnxForgeError, model: Path | None = None) -> list[str]:
    """The lines that report ``exc``: one per problem of an InvalidModelError, else one per
    line of the message; each names ``model`` and is clipped to one printable line."""
    if isinstance(exc, InvalidModelError):
        prefix = f"{exc.where}: " if exc.where else ""
        lines = [prefix + p for p in exc.problems] or [str(exc)]
    else:
        lines = str(exc).splitlines() or [type(exc).__name__]
    return [clip(_named(line, model)) for line in lines]


def load_valid(path: Path) -> Model:
    """Load ``path`` and refuse it unless it is valid (_validate.model_problems): exit 2 when
    it cannot be read, 1 listing every problem when it reads but is invalid."""
    model = load(path)
    validate(model, where=str(path))
    return model


def output_target(model: Path, output: Path | None, in_place: bool) -> Path | None:
    """Where a command writes: OUTPUT, or with --in-place MODEL itself (through a symbolic
    link, the file it points to). Without --in-place the input is never the output."""
    if in_place:
        if output is not None and output.resolve() != model.resolve():
            raise typer.BadParameter("give -o or --in-place, not both", param_hint="'--in-place'")
        return model.resolve() if model.is_symlink() else model
    if output is not None and output.resolve() == model.resolve():
        raise OnnxForgeError(
            f"{output}: refusing to overwrite the input; choose another -o or pass --in-place"
        )
    return output


def check_output(loaded: Model, target: Path, location: str, *, in_place: bool) -> None:
    """Refuse, before any work is written, an output whose model or data file would replace a
    file the input reads (its external data) unless --in-place, or that is a folder."""
    data = target.parent / location
    for path in (target, data):
        if path.is_dir() and not path.is_symlink():
            raise OnnxForgeError(f"{path}: is a folder; cannot write the result there")
    if in_place:
        return
    read = {p.resolve() for p in data_files(loaded)}
    for path in (target, data):
        if path.resolve() in read:
            raise OnnxForgeError(
                f"{path}: the input reads this file; writing it would change the input "
                "(choose another -o, or pass --in-place)"
            )


def in_place_location(loaded: Model, model: Path) -> str | None:
    """The external-data file name to keep when MODEL is replaced in place: its one data file
    beside it, or None (the default name)."""
    own = model.resolve()
    files = {p.resolve() for p in data_files(loaded)} - {own}
    if len(files) == 1:
        (only,) = files
        if only.parent == own.parent:
            return only.name
    return None


def refuse_shape_errors(loaded: Model, model: Path) -> None:
    """Run shape inference and raise ShapeError listing its errors (as `onnxforge infer`
    would), leaving the model's types as they were: for commands that infer as they work."""
    from onnxforge.shape_infer import infer  # noqa: PLC0415  (loads every shape rule)

    declared = {v: v.type for g in loaded.graphs() for v in g.values()}
    try:
        report = infer(loaded)
    finally:
        for value, t in declared.items():
            value.type = t
    if report.errors:
        lines = [f"{model}: {e}" for e in report.errors[:100]]
        if len(report.errors) > 100:
            lines.append(f"{model}: ... and {len(report.errors) - 100} more shape errors")
        raise InvalidModelError(lines)


def warn_stale(model: Path, lines: list[str]) -> None:
    """One warning line on stderr per declared type replaced by the inferred one."""
    for line in lines:
        stderr.print(clip(f"warning: {_named(line, model)}"), markup=False)


def _named(line: str, model: Path | None) -> str:
    if model is None or str(model) in line:
        return line
    return f"{model}: {line}"


@contextlib.contextmanager
def fail_on_errors(model: Path | None = None) -> Iterator[None]:
    """Turn an OnnxForgeError into its message on stderr and its exit code (2 unreadable
    input, 1 invalid model or impossible work); lines name ``model`` when they do not yet.

    Running out of memory or Python's recursion limit on a hostile model, or an OS error
    writing the result, is one line and exit 1 too, never a traceback.
    """
    try:
        yield
    except InvalidModelError as exc:
        for line in error_lines(exc, model):
            stderr.print(line, markup=False)
        raise typer.Exit(code=exc.exit_code) from None
    except OnnxForgeError as exc:
        for line in error_lines(exc, model):
            stderr.print(f"error: {line}", markup=False)
        raise typer.Exit(code=exc.exit_code) from None
    except RecursionError:
        what = f"{model}: " if model is not None else ""
        stderr.print(f"error: {what}nested too deeply to work on", markup=False)
        raise typer.Exit(code=1) from None
    except MemoryError:
        what = f"{model}: " if model is not None else ""
        stderr.print(f"error: {what}out of memory", markup=False)
        raise typer.Exit(code=1) from None
    except OSError as exc:
        where = exc.filename if exc.filename is not None else model
        reason = exc.strerror or str(exc)
        stderr.print(f"error: {os.fspath(where) if where else ''}: {reason}", markup=False)
        raise typer.Exit(code=1) from None


def _show_version(value: bool) -> None:
    if value:
        from onnxforge import __version__

        stdout.print(f"onnxforge {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Make ONNX models ready to ship: shapes, opset conversion, folding, cleanup."""
