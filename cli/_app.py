"""The Typer app and what every command shares: its options (one Annotated alias each), help
text, reading MODEL (a file or stdin), choosing where results go, reports and errors."""

from __future__ import annotations

__all__ = [
    "MAX_LINE",
    "AllowCast",
    "Durable",
    "ExternalData",
    "FoldLimit",
    "InPlace",
    "Json",
    "ModelArg",
    "OutputOption",
    "PinDefaults",
    "Quiet",
    "Strict",
    "app",
    "bare_json",
    "begin",
    "clip",
    "command",
    "emit_json",
    "error_lines",
    "errors",
    "fail_on_errors",
    "load_valid",
    "model_name",
    "note",
    "output_for",
    "paragraphs",
    "pin_defaults_note",
    "prepare_output",
    "reading",
    "refuse_shape_errors",
    "report_output",
    "session",
    "stderr",
    "stdout",
    "warn_stale",
    "writing",
]

import contextlib
import inspect
import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from onnxforge._validate import validate
from onnxforge.errors import InvalidModelError, OnnxForgeError, OutputError
from onnxforge.io import (
    STDIN_NAME,
    STDIO,
    Guard,
    Output,
    check_output,
    checkable_proto,
    checker_message,
    in_place_location,
    load,
    spooled_stdin,
)
from onnxforge.ir import Model
from onnxforge.passes import DEFAULT_FOLD_LIMIT, Instrument, Pass, PassResult
from onnxforge.shape_infer import infer

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Make ONNX models ready to ship: shapes, opset conversion, folding, cleanup.",
)
stdout = Console(highlight=False, soft_wrap=True)
"""A command's product (info's tables, check's problems, --json): never the model's bytes'
neighbour (a command writing the model to stdout prints nothing else there)."""
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
"""Tables, notes, warnings and progress: silenced by --quiet."""
errors = Console(stderr=True, highlight=False, soft_wrap=True)
"""Errors: never silenced."""
MAX_LINE = 1000
"""Characters of one message line at most (a million-entry attribute quoted in full is no
clear message)."""

# -- options shared by the commands ---------------------------------------------------------
ModelArg = Annotated[
    Path,
    typer.Argument(
        metavar="MODEL",
        help="The ONNX model file; - reads it from stdin.",
        show_default=False,
    ),
]
"""MODEL, on every command that reads one model."""
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        metavar="OUT",
        help="Where to write the result: a file (written beside it, then renamed into place), "
        "- for stdout, or a character device or FIFO (written through). Default: none; "
        "needed unless --in-place.",
        show_default=False,
    ),
]
"""-o, on fold, convert and optimize (infer's -o is optional and says so)."""
InPlace = Annotated[
    bool,
    typer.Option(
        "--in-place",
        help="Write the result over MODEL, atomically, its external data file included; "
        "MODEL must be a regular file. Default: off.",
        show_default=False,
    ),
]
"""--in-place, on every command that writes a model."""
Durable = Annotated[
    bool,
    typer.Option(
        "--durable",
        help="Flush the output to disk before renaming it into place, so a power cut cannot "
        "leave it empty (about 1 ms per small file, seconds per GiB). Default: off, as "
        "onnx.save.",
        show_default=False,
    ),
]
"""--durable, on every command that writes a model."""
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse a model whose declared shapes (value_info, outputs) contradict what its "
        "graph computes. Default: off (they are replaced, with a warning).",
        show_default=False,
    ),
]
"""--strict, on infer, fold, convert and optimize."""
ExternalData = Annotated[
    bool | None,
    typer.Option(
        "--external-data/--no-external-data",
        help="Write the weights to OUT.data beside OUT, or embed them all. Default: as the "
        "input has them, or external when over 2 GiB. Stdout, devices and FIFOs take "
        "embedded weights only.",
        show_default=False,
    ),
]
"""--external-data/--no-external-data, on every command that writes a model."""
AllowCast = Annotated[
    bool,
    typer.Option(
        "--allow-cast/--no-allow-cast",
        help="Converting: where the target opset lacks an element type, compute in a wider "
        "one (a Cast pair around the node) instead of refusing. Default: off.",
        show_default=False,
    ),
]
"""--allow-cast, on convert and optimize."""
PinDefaults = Annotated[
    bool,
    typer.Option(
        "--pin-defaults/--no-pin-defaults",
        help="Treat initializers listed as graph inputs (every one in IR < 4 models) as "
        "constants, so they fold (and --dtype or --weights convert them): they stop being "
        "inputs a caller may override, and "
        "ir_version becomes 4. onnxsim and onnxslim do this without asking. Default: off.",
        show_default=False,
    ),
]
"""--pin-defaults, on fold, optimize and convert."""
FoldLimit = Annotated[
    str,
    typer.Option(
        "--fold-limit",
        metavar="SIZE",
        help="Largest constant a fold may create when it is larger than the constant inputs "
        f"only that op reads (bytes; 64k, 1MiB). Default: {DEFAULT_FOLD_LIMIT} (1 KiB).",
        show_default=False,
    ),
]
"""--fold-limit, on fold and optimize."""
Json = Annotated[
    str | None,
    typer.Option(
        "--json",
        metavar="FILE",
        help="Give the report as JSON: --json alone or --json - prints it on stdout instead "
        "of the tables; --json FILE writes it to FILE as well. Default: tables on stderr.",
        show_default=False,
    ),
]
"""--json [FILE], on every command that reports (see _Command: a bare --json means stdout)."""
Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print nothing but errors: no tables, notes, warnings or progress (an asked-for "
        "--json still is). Default: off.",
        show_default=False,
    ),
]
"""--quiet, on every command that works on models."""


# -- commands: help text, examples, a bare --json ---------------------------------------------
class _Command(TyperCommand):
    """A command whose ``--json`` may come without a value: click's options take exactly one,
    so a bare ``--json`` (last, or before another option, or before MODEL: a value ending in
    .onnx) is read as ``--json=-``, stdout."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, bare_json(args))


def bare_json(args: Sequence[str]) -> list[str]:
    """``args`` with every bare ``--json`` written ``--json=-`` (see _Command)."""
    done: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return done + list(args[i:])
        if arg == "--json":
            following = args[i + 1] if i + 1 < len(args) else None
            if (
                following is None
                or (following.startswith("-") and following != STDIO)
                or following.lower().endswith(".onnx")
            ):
                done.append("--json=-")
                continue
        done.append(arg)
    return done


def paragraphs(doc: str) -> list[str]:
    """A docstring's paragraphs, each one line (its line breaks were only the source's)."""
    return [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n") if p.strip()]


F = TypeVar("F", bound=Callable[..., Any])


def command(*, examples: Sequence[str], name: str | None = None) -> Callable[[F], F]:
    """Register a command: its docstring as help, one line per paragraph (the terminal wraps
    them, not the source), the first paragraph as its line in ``onnxforge --help``, and
    ``examples`` (shell lines, escaped for rich markup) as the epilog."""

    def register(fn: F) -> F:
        text = paragraphs(fn.__doc__ or "")
        epilog = "\n\n".join(["Examples:", *(escape(line) for line in examples)])
        app.command(
            name,
            cls=_Command,
            help="\n\n".join(text),
            short_help=text[0] if text else None,
            epilog=epilog,
        )(fn)
        return fn

    return register


# -- the state of one command --------------------------------------------------------------
@dataclass
class _Session:
    quiet: bool = False
    json_on_stdout: bool = False

    @property
    def tables(self) -> bool:
        """Print tables and summaries: not --quiet, and no --json on stdout in their place."""
        return not self.quiet and not self.json_on_stdout

    @property
    def progress(self) -> bool:
        """A progress display may show: stderr is a terminal, not --quiet, no --json on
        stdout."""
        return stderr.is_terminal and self.tables


session = _Session()
"""What the running command was asked (set by ``begin``)."""


def begin(*, quiet: bool = False, report: Output | None = None) -> None:
    """Start a command: --quiet silences stderr's tables and notes (not errors); a --json
    report on stdout replaces the tables."""
    session.quiet = quiet
    session.json_on_stdout = report is not None and report.kind == "stdout"
    stderr.quiet = quiet


def note(line: str) -> None:
    """One ``note:`` line on stderr (silenced by --quiet)."""
    stderr.print(clip(f"note: {line}"), markup=False)


# -- messages --------------------------------------------------------------------------------
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


def error_lines(exc: OnnxForgeError, model: Path | str | None = None) -> list[str]:
    """The lines that report ``exc``: one per problem of an InvalidModelError, else one per
    line of the message; each names ``model`` and is clipped to one printable line."""
    if isinstance(exc, InvalidModelError):
        prefix = f"{exc.where}: " if exc.where else ""
        lines = [prefix + p for p in exc.problems] or [str(exc)]
    else:
        lines = str(exc).splitlines() or [type(exc).__name__]
    return [clip(_named(line, model)) for line in lines]


def warn_stale(model: Path | str, lines: list[str]) -> None:
    """One warning line on stderr per declared type replaced by the inferred one."""
    for line in lines:
        stderr.print(clip(f"warning: {_named(line, model)}"), markup=False)


def _named(line: str, model: Path | str | None) -> str:
    if model is None or str(model) in line:
        return line
    return f"{model}: {line}"


# -- reading MODEL ---------------------------------------------------------------------------
def model_name(model: Path) -> str:
    """How messages name MODEL: its path, or ``<stdin>`` for ``-``."""
    return STDIN_NAME if os.fspath(model) == STDIO else str(model)


@contextlib.contextmanager
def reading(model: Path) -> Iterator[Path]:
    """The file to read MODEL from while the block runs: MODEL, or for ``-`` a temporary copy
    of stdin (removed at the end; see io.spooled_stdin)."""
    if os.fspath(model) != STDIO:
        yield model
        return
    with spooled_stdin() as copy:
        yield copy


def load_valid(path: Path, name: str | None = None, *, keep_nodes: bool = False) -> Model:
    """Load ``path`` and refuse it unless it is valid (_validate.model_problems): exit 2 when
    it cannot be read, 1 listing every problem when it reads but is invalid. ``name``: how
    messages call it when it is a copy of stdin; ``keep_nodes``: see io.load."""
    model = load(path, name=name if name == STDIN_NAME else None, keep_nodes=keep_nodes)
    validate(model, where=name or str(path))
    return model


Rerun = Callable[[Model, Sequence[Instrument]], object]
"""A command's passes run again on a model, with these instruments."""


def guard_for(source: Path, name: str, rerun: Rerun | None = None) -> Guard:
    """The guard every written result passes (io.Guard): refused when onnx's full check fails
    on it but not on the input. ``rerun`` runs the command's passes again on a model with these
    instruments; it is called only for a refused result, to name the pass that broke it."""
    guard = Guard(source, name)
    if rerun is not None:
        guard.culprit = lambda: breaking_pass(source, rerun)
    return guard


class _CheckEach:
    """An instrument that runs onnx's full check after each pass (the slow path: a refusal)."""

    def before_pass(self, pass_: Pass, model: Model) -> None:
        pass

    def after_pass(self, pass_: Pass, model: Model, result: PassResult) -> None:
        if result.modified and checker_message(checkable_proto(model)) is not None:
            raise _BrokenBy(pass_.name)


class _BrokenBy(Exception):
    pass


def breaking_pass(source: Path, rerun: Rerun) -> str | None:
    """The first pass after which onnx's checker refuses what it accepted: the command's passes
    run again on a fresh copy of the input, checked after each one."""
    try:
        rerun(load(source), [_CheckEach()])
    except _BrokenBy as found:
        return str(found)
    except OnnxForgeError:
        return None
    return None


# -- where results go ------------------------------------------------------------------------
def output_for(model: Path, output: Path | None, in_place: bool) -> Output | None:
    """Where a command writes, decided before any work: OUT (see io.Output: a folder, a block
    device or a socket is refused, exit 2), or with --in-place MODEL itself (through a
    symbolic link, the file it points to; MODEL must be a regular file). Without --in-place
    the input is never the output."""
    if in_place:
        if output is not None and (
            os.fspath(model) == STDIO or output.resolve() != model.resolve()
        ):
            raise typer.BadParameter("give -o or --in-place, not both", param_hint="'--in-place'")
        if os.fspath(model) == STDIO:
            raise OutputError("--in-place: MODEL is stdin; give -o OUT (- for stdout)")
        try:
            st = model.stat()
        except OSError:
            return Output(model, "file")  # loading it reports why it cannot be read
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(
                f"{model}: --in-place replaces a regular file only, and this is not one; "
                "give -o OUT"
            )
        return Output(model.resolve() if model.is_symlink() else model, "file")
    if output is None:
        return None
    out = Output.at(output)
    if (
        not out.streamed
        and os.fspath(model) != STDIO
        and out.path is not None
        and out.path.resolve() == model.resolve()
    ):
        raise OnnxForgeError(
            f"{output}: refusing to overwrite the input; choose another -o or pass --in-place"
        )
    return out


def prepare_output(
    loaded: Model, model: Path, out: Output, *, in_place: bool, external_data: bool | None
) -> str:
    """The external data file name to write beside OUT (with --in-place, the one MODEL has),
    after refusing what io.check_output refuses: all before any work."""
    kept = in_place_location(loaded, model) if in_place else None
    base = out.path.name if out.path is not None and not out.streamed else "model.onnx"
    location = kept or f"{base}.data"
    check_output(loaded, out, location, in_place=in_place, external_data=external_data)
    return location


@contextlib.contextmanager
def writing(out: Output | None) -> Iterator[None]:
    """Open a stream OUT for the block (a FIFO waits here for its reader, before the work)
    and close it at the end, also when the work failed: a FIFO's reader then sees the end of
    an empty stream instead of waiting for ever."""
    if out is None:
        yield
        return
    out.open()
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            out.close()
        raise
    out.close()


def report_output(value: str | None, out: Output | None = None) -> Output | None:
    """Where --json goes: nowhere (not asked), stdout (``-``), or a file, device or FIFO.
    Refused (exit 2) before any work: stdout when the model goes there too, and a report
    file that is the model's output or named like a model (.onnx)."""
    if value is None:
        return None
    report = Output.at(value)
    if report.kind == "stdout" and out is not None and out.kind == "stdout":
        raise OutputError(
            "--json: stdout carries the model (-o -); write the report to a file (--json FILE)"
        )
    if report.path is not None and not report.streamed:
        same = out is not None and out.path is not None and report.path == out.path
        if same or report.path.suffix.lower() == ".onnx":
            raise OutputError(
                f"--json {value}: that names a model; --json takes the report's file (or -)"
            )
    return report


def emit_json(data: Mapping[str, Any] | list[Any], report: Output) -> None:
    """Give a --json report: pretty-printed on stdout, or written to its file (atomically),
    device or FIFO."""
    if report.kind == "stdout":
        stdout.print_json(json.dumps(data))
        return
    report.write_bytes((json.dumps(data, indent=2) + "\n").encode())


def pin_defaults_note(stats: Mapping[str, int], model: Model) -> str | None:
    """The line that explains a fold that found nothing because the ops it could fold read
    initializers that are also graph inputs (every weight of an IR 3 model is one), and
    names --pin-defaults; None otherwise."""
    refused = stats.get("not_folded.graph_input", 0)
    if not refused or any(stats.get(k, 0) for k in ("folded", "constants", "ifs_inlined")):
        return None
    graph = model.graph
    inputs = set(graph.inputs)
    defaults = sum(1 for v in graph.initializers if v in inputs)
    if defaults and defaults == len(graph.initializers):
        why = f"every initializer ({defaults}) is also a graph input"
        if model.ir_version < 4:
            why += f" (as IR {model.ir_version} requires)"
    else:
        why = f"{refused} ops read initializers that are also graph inputs"
    return (
        f"nothing folded: {why}, a default a caller may override; --pin-defaults makes "
        "them constants that fold"
    )


def refuse_shape_errors(loaded: Model, model: Path | str) -> None:
    """Run shape inference and raise ShapeError listing its errors (as `onnxforge infer`
    would), leaving the model's types as they were: for commands that infer as they work.
    ``loaded`` comes from load_valid, so the graph's invariants are not checked again."""
    declared = {v: v.type for g in loaded.graphs() for v in g.values()}
    try:
        report = infer(loaded, verify=False)
    finally:
        for value, t in declared.items():
            value.type = t
    if report.errors:
        lines = [f"{model}: {e}" for e in report.errors[:100]]
        if len(report.errors) > 100:
            lines.append(f"{model}: ... and {len(report.errors) - 100} more shape errors")
        raise InvalidModelError(lines)


@contextlib.contextmanager
def fail_on_errors(model: Path | str | None = None) -> Iterator[None]:
    """Turn an OnnxForgeError into its message on stderr and its exit code (2 unreadable
    input or an output that cannot be, 1 invalid model or impossible work); lines name
    ``model`` when they do not yet.

    Running out of memory or Python's recursion limit on a hostile model, or an OS error
    writing the result, is one line and exit 1 too, never a traceback.
    """
    try:
        yield
    except InvalidModelError as exc:
        for line in error_lines(exc, model):
            errors.print(line, markup=False)
        raise typer.Exit(code=exc.exit_code) from None
    except OnnxForgeError as exc:
        for line in error_lines(exc, model):
            errors.print(f"error: {line}", markup=False)
        raise typer.Exit(code=exc.exit_code) from None
    except RecursionError:
        what = f"{model}: " if model is not None else ""
        errors.print(f"error: {what}nested too deeply to work on", markup=False)
        raise typer.Exit(code=1) from None
    except MemoryError:
        what = f"{model}: " if model is not None else ""
        errors.print(f"error: {what}out of memory", markup=False)
        raise typer.Exit(code=1) from None
    except OSError as exc:
        where = exc.filename if exc.filename is not None else model
        reason = exc.strerror or str(exc)
        errors.print(f"error: {os.fspath(where) if where else ''}: {reason}", markup=False)
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
