"""The Typer app and the error handling every command shares."""

from __future__ import annotations

__all__ = ["app", "fail_on_errors", "stderr", "stdout"]

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console

from onnxforge.errors import InvalidModelError, OnnxForgeError

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Make ONNX models ready to ship: shapes, opset conversion, folding, cleanup.",
)
stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def fail_on_errors() -> Iterator[None]:
    """Turn an OnnxForgeError into its message on stderr and its exit code (2 unreadable
    input, 1 invalid model or impossible work)."""
    try:
        yield
    except InvalidModelError as exc:
        for line in str(exc).splitlines():
            stderr.print(line, markup=False)
        raise typer.Exit(code=exc.exit_code) from None
    except OnnxForgeError as exc:
        stderr.print(f"error: {exc}", markup=False)
        raise typer.Exit(code=exc.exit_code) from None


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
