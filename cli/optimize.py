"""`onnxforge optimize MODEL -o OUT`: infer, convert, fold, clean up, infer, and (--check N)
prove on onnxruntime that the result computes what the original did before writing it."""

from __future__ import annotations

__all__ = ["optimize"]

import gc
import time
from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.api._mixed_precision import DEFAULT_CALIBRATION_RUNS
from onnxforge.api._optimize import (
    DEFAULT_MAX_ITERATIONS,
    WEIGHTS,
    OptimizeOptions,
    for_toolchain,
    optimize_model,
    parse_input_shape,
)
from onnxforge.api.compare import BFLOAT16_TOLERANCE, DEFAULT_ATOL, DEFAULT_RTOL, HALF_TOLERANCE
from onnxforge.cli._app import (
    AllowCast,
    Durable,
    ExternalData,
    FoldLimit,
    InPlace,
    Json,
    ModelArg,
    OutputOption,
    PinDefaults,
    Quiet,
    Strict,
    begin,
    command,
    emit_json,
    fail_on_errors,
    guard_for,
    load_valid,
    model_name,
    note,
    output_for,
    pin_defaults_note,
    prepare_output,
    reading,
    report_output,
    session,
    stderr,
    warn_stale,
    writing,
)
from onnxforge.cli._check_result import check_result, float_inputs
from onnxforge.cli._precision import (
    Calibrate,
    CalibrationDir,
    KeepFloat32,
    calibration_for,
    calibration_json,
    defaults_note,
    keep_list,
)
from onnxforge.cli._progress import LONG_WRITE, PassProgress, long_graph, progress
from onnxforge.errors import OnnxForgeError
from onnxforge.io import save, write
from onnxforge.passes import DEFAULT_FOLD_LIMIT, PASSES
from onnxforge.passes.convert_precision import DTYPES
from onnxforge.passes.fold_constants import parse_size
from onnxforge.summary import size_summary, summarize
from onnxforge.toolchains import PROFILES, dynamic_rank_notes


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@command(
    examples=[
        "onnxforge optimize model.onnx -o model.opt.onnx --opset 18 --check 3",
        "cat model.onnx | onnxforge optimize - -o - > model.opt.onnx",
        "onnxforge convert model.onnx --opset 18 -o - | onnxforge optimize - -o model.opt.onnx",
        "onnxforge optimize zoo.onnx -o zoo.opt.onnx --pin-defaults --json report.json",
        "onnxforge optimize model.onnx --in-place --skip fuse-matmul-add,merge-parallel-matmuls",
    ]
)
def optimize(
    model: ModelArg,
    *,
    output: OutputOption = None,
    in_place: InPlace = False,
    durable: Durable = False,
    opset: Annotated[
        int | None,
        typer.Option(
            help="Convert to this default-domain opset first. Default: keep the model's.",
            show_default=False,
        ),
    ] = None,
    passes: Annotated[
        str | None,
        typer.Option(
            metavar="P,Q",
            help="Comma-separated passes to run (onnxforge passes lists them). Default: all.",
            show_default=False,
        ),
    ] = None,
    skip: Annotated[
        str,
        typer.Option(
            metavar="P,Q",
            help="Comma-separated passes not to run. Default: none.",
            show_default=False,
        ),
    ] = "",
    fold_limit: FoldLimit = str(DEFAULT_FOLD_LIMIT),
    input_shape: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=1,3,224,224",
            help="Fix an input's shape (repeatable). Default: the shapes the model declares.",
            show_default=False,
        ),
    ] = None,
    external_data: ExternalData = None,
    check: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Run original and result on N random input sets in onnxruntime; any "
            "difference is exit 1 and nothing is written (with --dtype: past --tolerance, "
            "also as onnx's reference evaluator computes the result). Default: 0 (no check).",
            show_default=False,
        ),
    ] = 0,
    tolerance: Annotated[
        float | None,
        typer.Option(
            "--tolerance",
            metavar="X",
            help="--check's budget: with --dtype, the largest difference over each output's "
            f"range; else rtol and atol. Default: {HALF_TOLERANCE:g} with --dtype "
            f"({BFLOAT16_TOLERANCE:g} for bfloat16), else "
            f"rtol {DEFAULT_RTOL:g} and atol {DEFAULT_ATOL:g}.",
            show_default=False,
        ),
    ] = None,
    allow_cast: AllowCast = False,
    max_iterations: Annotated[
        int,
        typer.Option(
            metavar="N",
            help=f"Rounds of the cleanup passes at most. Default: {DEFAULT_MAX_ITERATIONS}.",
            show_default=False,
        ),
    ] = DEFAULT_MAX_ITERATIONS,
    verify_each: Annotated[
        bool,
        typer.Option(
            help="Check the graph's invariants after every pass. Default: off (once, first).",
            show_default=False,
        ),
    ] = False,
    value_info: Annotated[
        bool,
        typer.Option(
            help="Write every inferred type as value_info. Default: off (the types the model "
            "declared, and those of inputs and outputs).",
            show_default=False,
        ),
    ] = False,
    pin_defaults: PinDefaults = False,
    weights: Annotated[
        str,
        typer.Option(
            metavar="HOW",
            help="Integer weights: "
            + "; ".join(f"{k}: {v}" for k, v in WEIGHTS.items())
            + ". Default: as-is (or the --for profile's).",
            show_default=False,
        ),
    ] = "as-is",
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            metavar="TYPE",
            help="Last, compute in float16 or bfloat16 where each op's schema allows it, as "
            "onnxforge convert --dtype does (graph inputs and outputs keep their type). "
            "Default: the model's.",
            show_default=False,
        ),
    ] = None,
    keep_float32: KeepFloat32 = "",
    calibrate: Calibrate = DEFAULT_CALIBRATION_RUNS,
    calibration: CalibrationDir = None,
    toolchain: Annotated[
        str | None,
        typer.Option(
            "--for",
            metavar="TOOLCHAIN",
            help="Prepare the model for this converter: "
            + ", ".join(PROFILES)
            + " (onnxforge passes --for TOOLCHAIN says what each changes). Default: "
            "onnxruntime's needs only.",
            show_default=False,
        ),
    ] = None,
    strict: Strict = False,
    report: Json = None,
    quiet: Quiet = False,
) -> None:
    """Optimize MODEL and write the result to OUT.

    Runs replace-stale-types, infer-shapes, convert-opset (with --opset), then fold-constants
    and the cleanup passes to a fixed point, then infer-shapes again (onnxforge passes lists
    them, in order). Same input and options give the same bytes. Nothing is written when any
    step fails or --check finds a difference; the input is replaced only with --in-place,
    atomically. A table of what changed, and each pass's time and effect, goes to stderr.
    """
    name = model_name(model)
    with fail_on_errors(name):
        if output is None and not in_place:
            raise typer.BadParameter("required unless --in-place", param_hint="'-o'")
        out = output_for(model, output, in_place)
        assert out is not None
        json_out = report_output(report, out)
        begin(quiet=quiet, report=json_out)
        if check < 0:
            raise typer.BadParameter("must be 0 or more", param_hint="'--check'")
        if tolerance is not None and not tolerance > 0:
            raise typer.BadParameter("must be more than 0", param_hint="'--tolerance'")
        try:
            shapes = dict(parse_input_shape(t) for t in input_shape or [])
        except OnnxForgeError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--input-shape'") from None
        options = OptimizeOptions(
            opset=opset,
            fold_limit=parse_size(fold_limit),
            passes=_names(passes) if passes is not None else None,
            skip=set(_names(skip)),
            input_shapes=shapes,
            max_iterations=max_iterations,
            verify_each=verify_each,
            allow_cast=allow_cast,
            value_info=value_info,
            pin_defaults=pin_defaults,
            strict=strict,
            toolchain=toolchain,
            weights=weights,
            dtype=dtype,
            keep_float32=keep_list(keep_float32),
        )
        if dtype is not None and dtype not in DTYPES:
            raise typer.BadParameter(f"one of {', '.join(DTYPES)}", param_hint="'--dtype'")
        if keep_float32 and dtype is None:
            raise typer.BadParameter("needs --dtype", param_hint="'--keep-float32'")
        mixed = calibration_for(
            name,
            dtype,
            runs=calibrate,
            folder=calibration,
            tolerance=tolerance,
            keep_io_types=True,
            keep=list(options.keep_float32),
        )
        options.choose = mixed
        if toolchain in PROFILES and PROFILES[toolchain].embedded and external_data is None:
            external_data = False
        if weights not in WEIGHTS:
            raise typer.BadParameter(f"one of {', '.join(WEIGHTS)}", param_hint="'--weights'")
        if toolchain is not None and toolchain not in PROFILES:
            raise typer.BadParameter(
                f"no such toolchain (one of {', '.join(PROFILES)})", param_hint="'--for'"
            )
        _unknown_passes(options)
        with writing(out), reading(model) as source:
            loaded = load_valid(source, name)
            location = prepare_output(
                loaded, model, out, in_place=in_place, external_data=external_data
            )
            before = summarize(loaded)
            if toolchain is not None:
                options = for_toolchain(options, loaded)
                target = f"opset {options.opset}" if options.opset else "the model's opset"
                note(
                    f"--for {toolchain}: {target}; "
                    + "; ".join(PROFILES[toolchain].changes(opset=False))
                )
            start = time.perf_counter()
            with progress(f"optimizing {name}", expected_long=long_graph(loaded)) as step:
                result = optimize_model(
                    loaded, options, instruments=[PassProgress(step, "optimizing")]
                )
            seconds = time.perf_counter() - start
            stale = result.details("replace-stale-types", "stale_types")
            warn_stale(name, stale)
            after = summarize(loaded)
            folding = Counter[str]()
            for row in result.rows:
                if row.pass_name.strip() == "fold-constants":
                    folding.update(row.stats)
            explained = pin_defaults_note(folding, loaded)
            if dtype is not None and explained is None:
                explained = defaults_note(loaded, "--dtype")
            rank_notes = []
            if toolchain is not None and not shapes:
                rank_notes = dynamic_rank_notes(PROFILES[toolchain], loaded)
            data = {
                "file": name,
                "output": out.name,
                "seconds": round(seconds, 4),
                "checked_input_sets": check,
                "stale_types": len(stale),
                "passes": result.to_json(),
                "before": size_summary(before),
                "after": size_summary(after),
                "notes": ([explained] if explained else []) + rank_notes,
                "calibration": calibration_json(mixed, name),
            }
            guard = guard_for(
                source,
                name,
                lambda m, instruments: optimize_model(m, options, instruments=instruments),
            )
            if not check:
                weights = after["initializer_bytes"]
                with progress(
                    f"writing {out.name}", expected_long=weights >= LONG_WRITE, total=weights
                ) as step:
                    write(
                        loaded,
                        out,
                        external_data=external_data,
                        location=location,
                        durable=durable,
                        progress=step.bytes_written if step.shown else None,
                        guard=guard,
                    )
            else:
                with out.staging() as staged:
                    save(
                        loaded,
                        staged,
                        external_data=False if out.streamed else external_data,
                        location=location,
                        durable=durable,
                        guard=guard,
                    )
                    # Unmap the source's weights before onnxruntime loads its own copies: a
                    # 2.3 GB model peaked at 2.4x its size with both resident (1.3x now, each
                    # model's session in its own child process).
                    result_inputs = float_inputs(loaded)
                    del loaded
                    gc.collect()
                    data["check"] = check_result(
                        source,
                        name,
                        staged,
                        runs=check,
                        tolerance=tolerance,
                        result_inputs=result_inputs,
                        precision=dtype,
                        shapes=shapes,
                    )
                    out.publish(staged, location)
        if json_out is not None:
            emit_json(data, json_out)
        if session.tables:
            _print(data, before, after)
        for line in ([explained] if explained else []) + rank_notes:
            note(f"{name}: {line}")


def _unknown_passes(options: OptimizeOptions) -> None:
    named = list(options.passes or []) + list(options.skip)
    unknown = [n for n in named if n not in PASSES]
    if unknown:
        raise typer.BadParameter(
            f"unknown pass {', '.join(unknown)}; passes: {', '.join(sorted(PASSES))} "
            "(onnxforge passes describes them)",
            param_hint="'--passes' / '--skip'",
        )


def _print(data: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    table = Table("", "before", "after", title=Text(f"{data['file']} -> {data['output']}"))
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
        stderr.print(
            f"checked: same outputs on {data['checked_input_sets']} random input sets",
            markup=False,
        )


def _opsets(s: dict[str, Any]) -> str:
    return ", ".join(f"{d} {v}" for d, v in s["opset_imports"].items())
