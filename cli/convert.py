"""`onnxforge convert MODEL --opset N -o OUT`: bring every node to another opset, up or down;
`--dtype float16|bfloat16|float32` converts its precision, `--weights float16` its weights."""

from __future__ import annotations

__all__ = ["convert"]

import gc
import time
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from onnxforge.api._mixed_precision import (
    DEFAULT_CALIBRATION_RUNS,
    WEIGHTS_TOLERANCE,
    Calibration,
)
from onnxforge.api._optimize import pin_input_defaults
from onnxforge.api.compare import (
    BFLOAT16_TOLERANCE,
    HALF_TOLERANCE,
)
from onnxforge.cli._app import (
    AllowCast,
    Durable,
    ExternalData,
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
from onnxforge.errors import AdapterError
from onnxforge.io import save, write
from onnxforge.ir import Model
from onnxforge.passes import (
    ConvertPrecisionPass,
    Instrument,
    Pass,
    PassManager,
    PassResult,
    ReplaceStaleTypesPass,
)
from onnxforge.passes.convert import ConvertOpsetPass, PlannedStep
from onnxforge.passes.convert_precision import DTYPES, HALVES

WEIGHT_DTYPES = tuple(k for k, v in DTYPES.items() if v in HALVES)
"""What --weights stores float32 weights as."""


@command(
    examples=[
        "onnxforge convert model.onnx --opset 18 -o model.op18.onnx",
        "onnxforge convert model.onnx --opset 13 --dry-run",
        "onnxforge convert - --opset 18 -o - < model.onnx > model.op18.onnx",
        "onnxforge convert model.onnx --opset 11 --allow-cast --in-place --json -",
        "onnxforge convert model.onnx --dtype float16 -o model.fp16.onnx",
        "onnxforge convert model.onnx --weights float16 -o model.small.onnx",
    ]
)
def convert(
    model: ModelArg,
    *,
    opset: Annotated[
        int | None,
        typer.Option(
            "--opset",
            metavar="N",
            help="The default-domain opset to reach. Default: the model's (then --dtype or "
            "--weights is required).",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            metavar="TYPE",
            help="Compute in float16 or bfloat16 where each op's schema allows it (the rest "
            "stays float32 behind Casts), or turn a half model back to float32. "
            "Default: the model's.",
            show_default=False,
        ),
    ] = None,
    keep_io_types: Annotated[
        bool,
        typer.Option(
            "--keep-io-types/--no-keep-io-types",
            help="With --dtype: graph inputs and outputs keep their type (Casts at the edges); "
            "--no-keep-io-types retypes them. Default: keep.",
            show_default=False,
        ),
    ] = True,
    keep_float32: KeepFloat32 = "",
    calibrate: Calibrate = DEFAULT_CALIBRATION_RUNS,
    calibration: CalibrationDir = None,
    weights_as: Annotated[
        str | None,
        typer.Option(
            "--weights",
            metavar="TYPE",
            help="Store float32 weights as float16 (or bfloat16) behind one Cast to float32 "
            "each: the file shrinks by about half and every op still computes in float32. "
            "Default: as they are.",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        int,
        typer.Option(
            "--check",
            metavar="N",
            help="Compare the result with MODEL on N random input sets before writing: each "
            "output's largest difference over its range, computed by onnxruntime and (after "
            "--dtype or --weights) by onnx's reference evaluator in the result's own types; "
            "past --tolerance is exit 1 and nothing is written. Default: 0 (no check).",
            show_default=False,
        ),
    ] = 0,
    tolerance: Annotated[
        float | None,
        typer.Option(
            "--tolerance",
            metavar="X",
            help="--check's budget: the largest difference over each output's range. Default: "
            f"{HALF_TOLERANCE:g} after --dtype ({BFLOAT16_TOLERANCE:g} for bfloat16: 3 fewer "
            f"significant bits), {WEIGHTS_TOLERANCE:g} after --weights, "
            "onnxruntime's rounding (rtol 1e-4, atol 1e-5) after --opset alone.",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = None,
    in_place: InPlace = False,
    durable: Durable = False,
    external_data: ExternalData = None,
    strict: Strict = False,
    allow_cast: AllowCast = False,
    pin_defaults: PinDefaults = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List what each node needs; write nothing. Default: off.",
            show_default=False,
        ),
    ] = False,
    as_json: Json = None,
    quiet: Quiet = False,
) -> None:
    """Convert MODEL to --opset, one opset step at a time, up or down; and/or to --dtype.

    Each node whose schema changes on a step goes through an adapter, or is kept when it is
    still valid and means the same. A node that cannot be converted blocks: every blocking node
    is listed (op, node name, versions, reason), the exit code is 1 and nothing is written.
    The result's ir_version is the lowest the target opset needs. --dry-run lists each node's
    steps (adapter or "automatic", or the problem) and writes nothing.

    --dtype float16|bfloat16 (after --opset) converts float32 values, weights and Cast targets
    where the op version's type constraints allow the half type; an input that does not take
    it (Resize's scales) and an op that has no such version stays float32 behind one Cast,
    mask fills float16 cannot hold are clamped to its lowest value, and an op whose epsilon it
    cannot hold stays float32 (both listed). --dtype float32 turns a half model back.

    --check N proves the result before it is written: N random input sets through the
    original and the result; after --dtype or --weights each output's largest difference
    over its range must be within --tolerance (1e-2 for --dtype float16, 8e-2 for bfloat16,
    1e-3 for --weights), both as onnxruntime computes the result and as onnx's reference
    evaluator does in its own types.
    """
    name = model_name(model)
    with fail_on_errors(name):
        if output is None and not dry_run and not in_place:
            raise typer.BadParameter("required unless --dry-run or --in-place", param_hint="'-o'")
        if in_place and dry_run:
            raise typer.BadParameter("--dry-run writes nothing", param_hint="'--in-place'")
        _check_options(opset, dtype, weights_as, dry_run)
        keep = keep_list(keep_float32)
        if keep and dtype is None and weights_as is None:
            raise typer.BadParameter("needs --dtype or --weights", param_hint="'--keep-float32'")
        mixed = calibration_for(
            name,
            dtype,
            runs=calibrate,
            folder=calibration,
            tolerance=tolerance,
            keep_io_types=keep_io_types,
            keep=keep,
            weights=weights_as,
        )
        if check < 0:
            raise typer.BadParameter("must be 0 or more", param_hint="'--check'")
        if tolerance is not None and not tolerance > 0:
            raise typer.BadParameter("must be more than 0", param_hint="'--tolerance'")
        if dry_run and check:
            raise typer.BadParameter("--dry-run writes nothing to check", param_hint="'--check'")
        out = None if dry_run else output_for(model, output, in_place)
        json_out = report_output(as_json, out)
        begin(quiet=quiet, report=json_out)
        with writing(out), reading(model) as source:
            loaded = load_valid(source, name)
            location = None
            if out is not None:
                location = prepare_output(
                    loaded, model, out, in_place=in_place, external_data=external_data
                )
            imports = loaded.opset_imports  # an ai.onnx.ml-only model imports no ai.onnx
            source_opset = imports.get("", imports.get("ai.onnx"))
            ir_before = loaded.ir_version
            converter = None if opset is None else ConvertOpsetPass(opset, allow_cast=allow_cast)
            precision = _precision_pass(dtype, weights_as, keep_io_types, keep, mixed)
            start = time.perf_counter()
            pinned = pin_input_defaults(loaded) if pin_defaults else 0
            stale = ReplaceStaleTypesPass(strict=strict)(loaded).details.get("stale_types", [])
            warn_stale(name, stale)
            report: dict[str, Any] = {
                "file": name,
                "output": None if out is None else out.name,
                "from_opset": source_opset,
                "to_opset": source_opset if opset is None else opset,
                "dry_run": dry_run,
                "stale_types": len(stale),
            }
            long = long_graph(loaded)
            if dry_run:
                assert converter is not None and opset is not None
                with progress("planning the conversion", expected_long=long):
                    steps = converter.plan(loaded, apply=True)  # the loaded copy is discarded
                problems = [s for s in steps if s.problem]
                report["seconds"] = round(time.perf_counter() - start, 4)
                report["steps"] = [_step_json(s) for s in steps]
                report["blocking"] = [str(s) for s in problems]
                if json_out is not None:
                    emit_json(report, json_out)
                if session.tables:
                    _print_steps(report, steps)
                if problems:
                    raise AdapterError(
                        f"{name}: cannot convert to opset {opset}; {len(problems)} blocking "
                        "node(s)"
                    )
                return
            assert out is not None
            stats: dict[str, int] = {}
            if pinned:
                stats["input_defaults_pinned"] = pinned
            if converter is not None:
                with progress(f"converting to opset {opset}", expected_long=long) as step:
                    PassProgress(step, "converting").before_pass(converter, loaded)
                    stats.update(converter(loaded).stats)
            if precision is not None:
                what = f"converting to {dtype or weights_as}"
                if mixed is not None:
                    what += f" (calibrating on {len(mixed.feeds or []) or mixed.runs} input sets)"
                with progress(what, expected_long=long or mixed is not None):
                    done = precision(loaded)
                report["precision"] = _precision_json(precision, done)
                report["precision"]["calibration"] = calibration_json(mixed, name)
                kept = defaults_note(loaded, f"--{'dtype' if dtype else 'weights'}")
                if kept is not None:
                    note(f"{name}: {kept}")
                    report["notes"] = [kept]
            report["seconds"] = round(time.perf_counter() - start, 4)
            weights = sum(v.const.nbytes for v in loaded.graph.initializers if v.const is not None)

            def replay(again: Model, instruments: Sequence[Instrument]) -> None:
                if pin_defaults:
                    pin_input_defaults(again)
                passes = [
                    ReplaceStaleTypesPass(strict=strict),
                    *_passes(opset, allow_cast, precision),
                ]
                PassManager(passes, instruments=instruments).run(again)

            guard = guard_for(source, name, replay)
            report["ir_version"] = {"before": ir_before, "after": loaded.ir_version}
            if not check:
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
                result_inputs = float_inputs(loaded)
                with out.staging() as staged:
                    save(
                        loaded,
                        staged,
                        external_data=False if out.streamed else external_data,
                        location=location,
                        durable=durable,
                        guard=guard,
                    )
                    del loaded
                    gc.collect()
                    report["check"] = check_result(
                        source,
                        name,
                        staged,
                        runs=check,
                        tolerance=tolerance,
                        result_inputs=result_inputs,
                        precision=dtype or ("weights" if weights_as else None),
                    )
                    out.publish(staged, location)
                report["checked_input_sets"] = check
            report["stats"] = dict(sorted(stats.items()))
        if json_out is not None:
            emit_json(report, json_out)
        if session.tables:
            _print_summary(report)


def _check_options(
    opset: int | None, dtype: str | None, weights: str | None, dry_run: bool
) -> None:
    """Usage errors (exit 2) before anything is read."""
    if opset is None and dtype is None and weights is None:
        raise typer.BadParameter("give --opset, --dtype or --weights", param_hint="'--opset'")
    if dtype is not None and dtype not in DTYPES:
        raise typer.BadParameter(f"one of {', '.join(DTYPES)}", param_hint="'--dtype'")
    if weights is not None and weights not in WEIGHT_DTYPES:
        raise typer.BadParameter(f"one of {', '.join(WEIGHT_DTYPES)}", param_hint="'--weights'")
    if dtype is not None and weights is not None:
        raise typer.BadParameter(
            "--weights keeps every op in float32; --dtype changes what they compute in",
            param_hint="'--weights'",
        )
    if dry_run and opset is None:
        raise typer.BadParameter("--dry-run plans an --opset conversion", param_hint="'--opset'")
    if dry_run and (dtype is not None or weights is not None):
        raise typer.BadParameter("--dry-run plans --opset only", param_hint="'--dry-run'")


def _precision_pass(
    dtype: str | None,
    weights: str | None,
    keep_io_types: bool,
    keep: list[str],
    mixed: Calibration | None,
) -> ConvertPrecisionPass | None:
    if dtype is not None:
        return ConvertPrecisionPass(
            dtype, keep_io_types=keep_io_types, keep_float32=keep, choose=mixed
        )
    if weights is not None:  # --keep-float32 names weights here
        return ConvertPrecisionPass(weights, weights_only=True, keep_float32=keep, choose=mixed)
    return None


def _passes(
    opset: int | None,
    allow_cast: bool,
    precision: ConvertPrecisionPass | None,
) -> list[Pass]:
    """What the command runs after replace-stale-types (the guard runs them again)."""
    found: list[Pass] = []
    if opset is not None:
        found.append(ConvertOpsetPass(opset, allow_cast=allow_cast))
    if precision is not None:
        found.append(precision)
    return found


def _precision_json(pass_: ConvertPrecisionPass, result: PassResult) -> dict[str, Any]:
    return {
        "dtype": pass_.dtype,
        "weights_only": pass_.weights_only,
        "keep_io_types": pass_.keep_io_types,
        "stats": dict(sorted(result.stats.items())),
        "kept_float32": result.details.get("kept_float32", []),
        "exact_in_half": result.details.get("exact_in_half", []),
        "constants_clamped": result.details.get("constants_clamped", []),
    }


def _step_json(step: PlannedStep) -> dict[str, Any]:
    return {
        "where": step.where,
        "node": step.node,
        "op": step.op_type,
        "from": step.from_opset,
        "to": step.to_opset,
        "how": step.how,
        "problem": step.problem,
    }


def _print_steps(report: dict[str, Any], steps: list[PlannedStep]) -> None:
    table = Table(
        "node",
        "op",
        "step",
        "how",
        title=Text(
            f"{report['file']}: opset {report['from_opset']} -> {report['to_opset']} (dry run)"
        ),
        title_justify="left",
    )
    for s in steps:
        node = f"{s.where}: {s.node}" if s.where else s.node
        how = Text(s.problem, style="red") if s.problem else Text(s.how)
        table.add_row(Text(node), s.op_type, f"{s.from_opset} -> {s.to_opset}", how)
    stderr.print(table)
    counts = Counter("blocked" if s.problem else s.how for s in steps)
    summary = ", ".join(f"{how}: {n}" for how, n in sorted(counts.items())) or "no node changes"
    stderr.print(summary, markup=False)


def _print_summary(report: dict[str, Any]) -> None:
    ir = report["ir_version"]
    table = Table(
        "how",
        "node steps",
        title=Text(
            f"{report['file']} (opset {report['from_opset']}, IR {ir['before']}) -> "
            f"{report['output']} (opset {report['to_opset']}, IR {ir['after']})"
        ),
        title_justify="left",
    )
    for key, count in report["stats"].items():
        table.add_row(Text(key.removeprefix("adapted.")), str(count))
    precision = report.get("precision")
    if report["stats"] or precision is None:
        stderr.print(table)
    else:
        stderr.print(table.title)
    if precision is not None:
        what = "weights" if precision["weights_only"] else "values"
        rows = Table(
            "change",
            "count",
            title=Text(f"{report['output']}: {what} to {precision['dtype']}"),
            title_justify="left",
        )
        for key, count in precision["stats"].items():
            rows.add_row(Text(key), str(count))
        stderr.print(rows)
        for line in precision["kept_float32"]:
            stderr.print(Text(f"kept in float32: {line}"))
        for line in precision["exact_in_half"]:
            stderr.print(Text(f"not kept after all: {line}"))
        for line in precision["constants_clamped"]:
            stderr.print(Text(f"clamped: {line}"))
    stderr.print(f"{report['seconds']:.3f} s", markup=False)
