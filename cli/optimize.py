"""`onnxforge optimize MODEL -o OUT`: infer, convert, fold, clean up, infer, and (--check N)
prove on onnxruntime that the result computes what the original did before writing it."""

from __future__ import annotations

__all__ = ["optimize"]

import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge import _cleanup
from onnxforge._optimize import (
    DEFAULT_MAX_ITERATIONS,
    OptimizeOptions,
    fix_input_shapes,
    optimize_model,
    parse_input_shape,
)
from onnxforge.cli._app import (
    PIN_DEFAULTS_HELP,
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
from onnxforge.compare import compare_on_onnxruntime, random_inputs
from onnxforge.errors import OnnxForgeError
from onnxforge.io import load, save
from onnxforge.passes.fold_constants import parse_size
from onnxforge.summary import size_summary, summarize


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@app.command()
def optimize(
    model: Annotated[Path, typer.Argument(help="The .onnx file to optimize.")],
    *,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write the result.")
    ] = None,
    in_place: InPlace = False,
    durable: Durable = False,
    opset: Annotated[
        int | None, typer.Option(help="Convert to this default-domain opset first.")
    ] = None,
    passes: Annotated[
        str | None, typer.Option(help="Comma-separated passes to run (default: all).")
    ] = None,
    skip: Annotated[str, typer.Option(help="Comma-separated passes not to run.")] = "",
    fold_limit: Annotated[
        str | None,
        typer.Option(help="Largest constant folding may create (bytes; 64k, 1MiB)."),
    ] = None,
    input_shape: Annotated[
        list[str] | None,
        typer.Option(help="Fix an input's shape: NAME=1,3,224,224 (repeatable)."),
    ] = None,
    external_data: Annotated[
        bool | None,
        typer.Option(
            "--external-data/--no-external-data",
            help="Write weights to OUT.data (default: as the input, or when over 2 GB).",
        ),
    ] = None,
    check: Annotated[
        int,
        typer.Option(
            help="Run original and result on N random input sets in onnxruntime; any "
            "difference is exit 1 and nothing is written.",
        ),
    ] = 0,
    allow_cast: Annotated[
        bool, typer.Option(help="Converting: wrap nodes in Casts for dtypes the target lacks.")
    ] = False,
    max_iterations: Annotated[
        int, typer.Option(help="Rounds of the cleanup passes at most.")
    ] = DEFAULT_MAX_ITERATIONS,
    verify_each: Annotated[
        bool, typer.Option(help="Check the graph's invariants after every pass.")
    ] = False,
    value_info: Annotated[
        bool,
        typer.Option(help="Write every inferred type as value_info (default: the interface's)."),
    ] = False,
    pin_defaults: Annotated[
        bool,
        typer.Option(help=PIN_DEFAULTS_HELP),
    ] = False,
    strict: Strict = False,
    report: Annotated[
        Path | None, typer.Option("--json", help="Write the report as JSON to this file.")
    ] = None,
) -> None:
    """Optimize MODEL and write the result to OUTPUT.

    Runs replace-stale-types, infer-shapes, convert-opset (with --opset), then fold-constants
    and the cleanup passes to a fixed point, then infer-shapes again. Same input and options
    give the same bytes. Nothing is written when any step fails or --check finds a
    difference; the input is replaced only with --in-place, atomically.
    """
    with fail_on_errors(model):
        if output is None and not in_place:
            raise typer.BadParameter("required unless --in-place", param_hint="'-o'")
        target = output_target(model, output, in_place)
        assert target is not None
        if check < 0:
            raise typer.BadParameter("must be 0 or more", param_hint="'--check'")
        try:
            shapes = dict(parse_input_shape(t) for t in input_shape or [])
        except OnnxForgeError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--input-shape'") from None
        options = OptimizeOptions(
            opset=opset,
            fold_limit=None if fold_limit is None else parse_size(fold_limit),
            passes=_names(passes) if passes is not None else None,
            skip=set(_names(skip)),
            input_shapes=shapes,
            max_iterations=max_iterations,
            verify_each=verify_each,
            allow_cast=allow_cast,
            value_info=value_info,
            pin_defaults=pin_defaults,
            strict=strict,
        )
        _unknown_passes(options)
        loaded = load_valid(model)
        location = (in_place_location(loaded, model) if in_place else None) or (
            f"{target.name}.data"
        )
        check_output(loaded, target, location, in_place=in_place)
        before = summarize(loaded)
        start = time.perf_counter()
        with stderr.status(f"optimizing {model.name}"):
            result = optimize_model(loaded, options)
        seconds = time.perf_counter() - start
        stale = result.details("replace-stale-types", "stale_types")
        warn_stale(model, stale)
        after = summarize(loaded)
        if not check:  # written unnamed beside OUT and renamed into place: nothing to stage
            save(loaded, target, external_data=external_data, location=location, durable=durable)
        else:
            with _staging(target) as staged:
                save(
                    loaded, staged, external_data=external_data, location=location, durable=durable
                )
                # Unmap the source's weights before onnxruntime loads its own copies: a 2.3 GB
                # model peaked at 2.4x its size with both resident (1.3x now, each model's
                # session in its own child process).
                del loaded
                gc.collect()
                _check_and_publish(model, staged, target, location, check=check, shapes=shapes)
        data = {
            "file": str(model),
            "output": str(target),
            "seconds": round(seconds, 4),
            "checked_input_sets": check,
            "stale_types": len(stale),
            "passes": result.to_json(),
            "before": size_summary(before),
            "after": size_summary(after),
        }
        if report is not None:
            report.write_text(json.dumps(data, indent=2) + "\n")
        _print(data, before, after)


def _unknown_passes(options: OptimizeOptions) -> None:
    from onnxforge.passes import PASSES  # noqa: PLC0415

    named = list(options.passes or []) + list(options.skip)
    unknown = [n for n in named if n not in PASSES]
    if unknown:
        raise typer.BadParameter(
            f"unknown pass {', '.join(unknown)}; passes: {', '.join(sorted(PASSES))}",
            param_hint="'--passes' / '--skip'",
        )


def _check_and_publish(
    model: Path,
    staged: Path,
    target: Path,
    location: str,
    *,
    check: int,
    shapes: dict[str, list[int]],
) -> None:
    """--check: compare the result staged beside OUT with the original on onnxruntime, and
    rename it into place only when every output agrees."""
    with stderr.status(f"checking on onnxruntime ({check} input sets)"):
        original = load(model)
        if shapes:
            fix_input_shapes(original, shapes)
        feeds = random_inputs(original, check)
        names = [v.name for v in original.graph.outputs]
        del original
        problems = compare_on_onnxruntime(model, staged, feeds, names)
    if problems:
        for line in problems:
            stderr.print(clip(f"{model}: {line}"), markup=False)
        stderr.print(
            f"{model}: the result differs from the original; nothing written", markup=False
        )
        raise typer.Exit(code=1)
    _publish(staged, target, location)


class _staging:
    """A folder beside OUT (same filesystem) where the result is written and checked, then
    renamed into place: a failed check or a crash leaves OUT as it was. The folder is
    registered with onnxforge._cleanup, so a signal, or the janitor after a SIGKILL,
    removes it too."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self.folder: Path | None = None

    def __enter__(self) -> Path:
        parent = self.output.parent
        if not parent.is_dir():
            raise OnnxForgeError(f"{self.output}: the folder {str(parent)!r} does not exist")
        self.folder = Path(
            tempfile.mkdtemp(prefix=f".{self.output.name}.{os.getpid()}.", dir=parent)
        )
        _cleanup.register(self.folder)
        return self.folder / self.output.name

    def __exit__(self, *exc: object) -> None:
        if self.folder is not None:
            _cleanup.remove(self.folder)
            _cleanup.unregister(self.folder)


def _publish(staged: Path, output: Path, location: str) -> None:
    """Data file first, then the model: the model never points at a missing data file; a
    polite kill (SIGTERM, Ctrl-C) waits until both are in place."""
    data = staged.parent / location
    with _cleanup.blocked_signals():
        if data.exists():
            os.replace(data, output.parent / location)
        os.replace(staged, output)


def _print(data: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    table = Table("", "before", "after", title=f"{data['file']} -> {data['output']}")
    table.add_row("nodes", str(before["nodes_total"]), str(after["nodes_total"]))
    table.add_row("initializers", str(before["initializers"]), str(after["initializers"]))
    table.add_row(
        "initializer bytes", str(before["initializer_bytes"]), str(after["initializer_bytes"])
    )
    table.add_row("opsets", _opsets(before), _opsets(after))
    for op_type in sorted(set(before["op_types"]) | set(after["op_types"])):
        b, a = before["op_types"].get(op_type, 0), after["op_types"].get(op_type, 0)
        if a != b:
            table.add_row(Text(f"  {op_type}"), str(b), str(a))
    stderr.print(table)
    passes = Table("pass", "seconds", "nodes", "changes", title="passes")
    for row in data["passes"]:
        stats = row["stats"]
        if row["pass"] == "fixed-point":  # its inner passes have rows of their own
            stats = {"iterations": stats.get("iterations", 0)}
        changes = ", ".join(f"{k} {v}" for k, v in sorted(stats.items()) if v)
        passes.add_row(
            row["pass"],
            f"{row['seconds']:.3f}",
            f"{row['ops_before']} -> {row['ops_after']}",
            Text(changes or "-"),
        )
    stderr.print(passes)
    stderr.print(f"{data['seconds']:.3f} s", markup=False)
    if data["checked_input_sets"]:
        stdout.print(
            f"checked: same outputs on {data['checked_input_sets']} random input sets",
            markup=False,
        )


def _opsets(s: dict[str, Any]) -> str:
    return ", ".join(f"{d} {v}" for d, v in s["opset_imports"].items())
