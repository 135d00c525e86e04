"""The `onnxforge` command line (Typer): one module per command."""

from __future__ import annotations

__all__ = ["app", "main"]

import sys

from onnxforge.cli import check as _check  # noqa: F401  (registers the command)
from onnxforge.cli import convert as _convert  # noqa: F401  (registers the command)
from onnxforge.cli import fold as _fold  # noqa: F401  (registers the command)
from onnxforge.cli import infer as _infer  # noqa: F401
from onnxforge.cli import info as _info  # noqa: F401
from onnxforge.cli import optimize as _optimize  # noqa: F401
from onnxforge.cli._app import app


def main() -> None:
    """Entry point: run the app; an unexpected failure is one line on stderr, never a traceback."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001  (typer.Exit/SystemExit are BaseException, not caught)
        print(f"onnxforge: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
