"""The `onnxforge` command line (Typer): one module per command."""

from __future__ import annotations

__all__ = ["app", "main"]

import gc
import sys

from onnxforge import _cleanup
from onnxforge.cli import check as _check  # noqa: F401  (registers the command)
from onnxforge.cli import convert as _convert  # noqa: F401  (registers the command)
from onnxforge.cli import fold as _fold  # noqa: F401  (registers the command)
from onnxforge.cli import infer as _infer  # noqa: F401
from onnxforge.cli import info as _info  # noqa: F401
from onnxforge.cli import optimize as _optimize  # noqa: F401
from onnxforge.cli import passes as _passes  # noqa: F401
from onnxforge.cli._app import MAX_LINE, app


def main() -> None:
    """Entry point: run the app; an unexpected failure is one line on stderr, never a traceback.

    SIGTERM, SIGINT and SIGHUP remove the temporary files being written before the process
    ends; a janitor process removes them after a SIGKILL (onnxforge._cleanup).
    """
    _cleanup.install_handlers()
    _cleanup.enable_janitor()
    # One command, one model: what it builds lives to the end, and its garbage is freed by
    # reference counting (optimize collects once, by hand, before checking its output). The
    # collector's passes over a graph built outside ir.no_gc (validation, inference) were 17%
    # of `infer` on the 100k blocks (2.78 -> 2.32 s) and 9% at 1M nodes, for no memory back.
    gc.disable()
    try:
        app()
    except Exception as exc:  # noqa: BLE001  (typer.Exit/SystemExit are BaseException, not caught)
        message = f"{type(exc).__name__}: {exc}"
        if len(message) > MAX_LINE:
            message = message[:MAX_LINE] + " ..."
        print(f"onnxforge: internal error: {message}", file=sys.stderr)
        sys.exit(1)
    finally:
        # The process ends here: what the command built (a graph of a million ops is millions
        # of objects in reference cycles) need not be collected on the way out. Python's last
        # collection at exit (which runs with the collector disabled too) took 0.44 s of
        # `infer`'s 2.40 s on the 100k-op chain.
        gc.freeze()
