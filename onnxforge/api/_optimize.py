"""The main job: infer -> convert -> fold -> clean up to a fixed point -> infer, as one call
(`onnxforge optimize` and ``onnxforge.optimize``)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "OptimizeOptions",
    "convert",
    "fix_input_shapes",
    "fold",
    "infer",
    "optimize",
    "optimize_model",
    "parse_input_shape",
    "pin_input_defaults",
    "pipeline",
]

import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from onnxforge import io, toolchains
from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import DType, Model, Op, TensorType
from onnxforge.kernels import NONDETERMINISTIC
from onnxforge.passes import (
    ConvertOpsetPass,
    ConvertPrecisionPass,
    FixedPoint,
    FoldConstantsPass,
    FuseDequantizeLinearPass,
    InferShapesPass,
    PassManager,
    ReplaceStaleTypesPass,
    cleanup_passes,
    fold_pipeline,
)
from onnxforge.passes.convert import convert as convert_model
from onnxforge.passes.convert import find_adapter
from onnxforge.passes.fold_constants import QUANTIZATION
from onnxforge.passes.toolchain_forms import (
    dropout_as_inference,
    gelu_scale_first,
    spell_out_fill,
)
from onnxforge.shape_infer import infer as infer_model

logger = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 8


@dataclass
class OptimizeOptions:
    """What `onnxforge optimize` lets a user set (the CLI's options, one to one)."""

    opset: int | None = None
    fold_limit: int | None = None  # None: the fold pass's default
    passes: Sequence[str] | None = None  # None: every pass of the default pipeline
    skip: Collection[str] = ()
    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    verify_each: bool = False
    allow_cast: bool = False
    value_info: bool = False  # write every inferred type, not just the interface's
    pin_defaults: bool = False  # initializers listed as graph inputs become constants
    strict: bool = False  # declared types that contradict inference are errors, not replaced
    toolchain: str | None = None  # --for: a profile of onnxforge.toolchains
    weights: str = "as-is"  # integer weights: as-is, dequantize-linear or float (WEIGHTS)
    # op type -> input ports that must be initializers: what computes them folds (--for)
    initializer_inputs: Mapping[str, Sequence[int]] = field(default_factory=dict)
    dropout_as_inference: bool = False  # training-mode Dropout made inference's identity (--for)
    gelu_scale_first: bool = False  # the erf GELU as (x * 0.5) * (erf + 1) (--for mnn)
    dtype: str | None = None  # float16, bfloat16 or float32: convert-precision, last
    keep_io_types: bool = True
    keep_float32: Collection[str] = ()  # node names, output names or op types
    # the automatic mixed precision (api.Calibration): more ops to keep, from a run
    choose: Callable[[Model], Mapping[str, str]] | None = None


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """``"x=1,3,224,224"`` -> ("x", [1, 3, 224, 224])."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise OnnxForgeError(
            f"--input-shape {text!r}: expected NAME=D1,D2,... (e.g. x=1,3,224,224)"
        )
    try:
        shape = [int(d) for d in dims.split(",")] if dims.strip() else []
    except ValueError:
        raise OnnxForgeError(f"--input-shape {text!r}: dims must be integers") from None
    if any(d < 0 for d in shape):
        raise OnnxForgeError(f"--input-shape {text!r}: dims must not be negative")
    return name, shape


def fix_input_shapes(model: Model, shapes: Mapping[str, Sequence[int]]) -> None:
    """Give graph inputs static shapes (symbolic dims of the model fixed by the user); a name
    that is no input, a rank that differs or a static dim that disagrees is an error."""
    inputs = {v.name: v for v in model.graph.inputs if v.const is None}
    for name, dims in shapes.items():
        value = inputs.get(name)
        if value is None:
            known = ", ".join(sorted(inputs)) or "none"
            raise OnnxForgeError(
                f"--input-shape: the model has no input {name!r} (inputs: {known})"
            )
        t = value.type
        if not isinstance(t, TensorType):
            raise OnnxForgeError(f"--input-shape: input {name!r} is not a tensor")
        if t.shape is not None:
            if len(t.shape) != len(dims):
                raise OnnxForgeError(
                    f"--input-shape: input {name!r} has rank {len(t.shape)}, not {len(dims)}"
                )
            for i, (have, want) in enumerate(zip(t.shape, dims, strict=True)):
                if isinstance(have, int) and have != want:
                    raise OnnxForgeError(
                        f"--input-shape: input {name!r} dim {i} is {have} in the model, not {want}"
                    )
        value.type = TensorType(t.dtype, tuple(int(d) for d in dims))


def pin_input_defaults(model: Model) -> int:
    """Make the initializers listed as graph inputs (every one, in IR < 4 models) plain
    constants, so folding may use them: they leave the graph's inputs, a caller can no longer
    override them, and ir_version becomes at least 4 (which lets initializers be unlisted).
    onnxsim and onnxslim do this silently; here only when asked. Returns how many."""
    graph = model.graph
    pinned = [v for v in graph.inputs if v.const is not None]
    if pinned:
        graph.inputs = [v for v in graph.inputs if v.const is None]
        model.ir_version = max(model.ir_version, 4)
    return len(pinned)


WEIGHTS = {
    "as-is": "integer weights stay as the model computes them (Cast -> Mul stays)",
    "dequantize-linear": "Cast(int8 weight) -> Mul(scale) becomes one DequantizeLinear",
    "float": "integer weights and their DequantizeLinear are folded to float weights",
}
"""What optimize does to integer weights. Not DequantizeLinear by default: onnxruntime 1.31's
default session turns an 8-bit DequantizeLinear -> MatMul into MatMulNBits, which rounds the
activations to int8 (0.55-0.7% off float32, where Cast -> Mul folds to float and is exact)."""


def for_toolchain(options: OptimizeOptions, model: Model) -> OptimizeOptions:
    """The options with ``options.toolchain``'s profile applied to this model: its opset,
    pinned defaults, float weights, inputs read from initializers alone; an error when it
    needs static shapes the model and --input-shape do not give. The result names no
    toolchain, so that optimize_model does not apply it again after the command line did."""
    if options.toolchain is None:
        return options
    p = toolchains.profile(options.toolchain)
    toolchains.check_static_shapes(p, model, options.input_shapes)
    return replace(
        options,
        toolchain=None,
        opset=toolchains.choose_opset(p, model, options.opset, lowers=_lowers),
        pin_defaults=options.pin_defaults or p.pin_defaults,
        weights=p.weights if options.weights == "as-is" else options.weights,
        initializer_inputs={**p.initializer_inputs, **options.initializer_inputs},
        dropout_as_inference=options.dropout_as_inference or p.dropout_as_inference,
        gelu_scale_first=options.gelu_scale_first or p.gelu_scale_first,
    )


def _lowers(op_type: str) -> bool:
    """The conversion writes ``op_type`` in older ops below the opset that introduced it (an
    adapter down from its first version: Gelu-20, LayerNormalization-17; none for
    DequantizeLinear-10)."""
    versions = schemas.schema_versions(op_type)
    return bool(versions) and find_adapter(op_type, versions[0], versions[0] - 1) is not None


def _weight_dequantization(op: Op) -> bool | None:
    """fold-constants' should_fold under weights="float": DequantizeLinear and Cast of an integer
    constant to a float fold whatever their size (the Mul by the scale then frees what they
    made)."""
    if op.op_type not in ("DequantizeLinear", "Cast") or not op._inputs:
        return None
    x = op._inputs[0]
    if x is None or x.const is None:
        return None
    if op.op_type == "DequantizeLinear":
        return True
    source, target = DType(x.const.dtype).numpy, DType(int(op.attr("to", 0))).numpy
    if source is None or target is None:
        return None
    return (source.kind in "iu" and target.kind == "f") or None


FEEDS_DEPTH = 4
"""How many ops on from a folded op an input of ``initializer_inputs`` may be (a weight
generated, reshaped, transposed, scaled)."""


def _feeds(op: Op, ports: Mapping[str, Sequence[int]], depth: int = FEEDS_DEPTH) -> bool:
    """An output of ``op`` is read at one of ``ports`` (op type -> input indices), or is read
    by an op that is, within ``depth`` ops."""
    if depth <= 0:
        return False
    for value in op._outputs:
        graph = None if value is None else value.graph
        if value is None or graph is None:
            continue
        for reader, port in graph.consumers(value):
            if port in ports.get(reader.op_type, ()) and reader.domain in ("", "ai.onnx"):
                return True
            if _feeds(reader, ports, depth - 1):
                return True
    return False


def _should_fold(options: OptimizeOptions) -> Any:
    """fold-constants' should_fold for these options: integer weights under weights="float"
    (``_weight_dequantization``), and whatever computes an input of ``initializer_inputs``
    from constants, whatever its size (a converter that reads it from an initializer fails
    on anything else; where the chain cannot fold at all, it fails either way)."""
    ports = options.initializer_inputs
    dequantize = options.weights == "float"

    def decide(op: Op) -> bool | None:
        if dequantize and _weight_dequantization(op):
            return True
        if not ports or op.domain not in ("", "ai.onnx") or any(True for _ in op.subgraphs()):
            return None
        if op.op_type in NONDETERMINISTIC or op.op_type in QUANTIZATION:
            return None  # only the size limit is lifted
        return True if _feeds(op, ports) else None

    return decide


def pipeline(options: OptimizeOptions, *, instruments: Sequence[Any] = ()) -> Any:
    """The PassManager `optimize` runs for these options (``instruments`` watch the passes:
    the command line's progress display)."""
    limit: dict[str, Any] = (
        {} if options.fold_limit is None else {"limit_bytes": options.fold_limit}
    )
    if options.weights not in WEIGHTS:
        raise OnnxForgeError(f"weights {options.weights!r}: one of {', '.join(WEIGHTS)}")
    first: list[Any] = [FoldConstantsPass(**limit)]
    if options.weights == "float" or options.initializer_inputs:
        first = [FoldConstantsPass(**limit, should_fold=_should_fold(options))]
    if options.weights == "dequantize-linear":
        # before folding, which could spend its growth budget turning the small ones into
        # float weights four times larger (DequantizeLinear itself is never folded)
        first = [FuseDequantizeLinearPass(), *first]
    group = [p for p in [*first, *cleanup_passes()] if _wanted(p.name, options)]
    stages: list[Any] = [
        ReplaceStaleTypesPass(strict=options.strict),
        InferShapesPass(strict=True),  # an inconsistent model stops
    ]
    if options.opset is not None and _wanted("convert-opset", options):
        stages.append(ConvertOpsetPass(options.opset, allow_cast=options.allow_cast))
    if group:
        stages.append(FixedPoint(group, max_iterations=options.max_iterations))
    if options.dtype is not None:  # asked for by name: --passes and --skip do not drop it
        # last: folding and cleanup work on float32 values, as the model was written
        stages.append(
            ConvertPrecisionPass(
                options.dtype,
                keep_io_types=options.keep_io_types,
                keep_float32=options.keep_float32,
                choose=options.choose,
            )
        )
    stages.append(InferShapesPass())
    return PassManager(stages, verify_each=options.verify_each, instruments=instruments)


def _wanted(name: str, options: OptimizeOptions) -> bool:
    if options.passes is not None and name not in options.passes:
        return False
    return name not in options.skip


def optimize_model(
    model: Model, options: OptimizeOptions | None = None, *, instruments: Sequence[Any] = ()
) -> Any:
    """Optimize ``model`` in place; returns the PassManager's Report.

    The passes work on every inferred type; the result keeps types where the model declared
    them and on graph inputs and outputs (value_info for every value would grow small
    models by a quarter) unless ``options.value_info``.
    """
    options = for_toolchain(options or OptimizeOptions(), model)
    if options.pin_defaults:
        pin_input_defaults(model)
    if options.input_shapes:
        fix_input_shapes(model, options.input_shapes)
    if options.dropout_as_inference:
        dropout_as_inference(model)
    spell_out_fill(model)
    declared = {v for g in model.graphs() for v in g.values() if v.type is not None}
    report = pipeline(options, instruments=instruments).run(model)
    if options.gelu_scale_first:  # after the passes, which leave a GELU's products alone
        gelu_scale_first(model)
    if not options.value_info:
        for graph in model.graphs():
            interface = set(graph.inputs) | set(graph.outputs)
            for value in graph.values():
                if value not in declared and value not in interface:
                    value.type = None
    return report


def _model(model_or_path: Any) -> Model:
    if isinstance(model_or_path, Model):
        return model_or_path
    if isinstance(model_or_path, str | os.PathLike):
        return io.load(model_or_path)
    return io.from_proto(model_or_path)


def _proto(model: Model) -> Any:
    return io.to_proto(model)


def optimize(
    model_or_path: Any,
    *,
    opset: int | None = None,
    fold_limit: int | None = None,
    passes: Sequence[str] | None = None,
    skip: Collection[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    allow_cast: bool = False,
    pin_defaults: bool = False,
) -> Any:
    """Optimize a model (an onnx.ModelProto, a path, or a Model, which is changed in place)
    and return an onnx.ModelProto: what `onnxforge optimize` does, for converters that call
    us as a library."""
    model = _model(model_or_path)
    options = OptimizeOptions(
        opset=opset,
        fold_limit=fold_limit,
        passes=passes,
        skip=skip,
        input_shapes=dict(input_shapes or {}),
        allow_cast=allow_cast,
        pin_defaults=pin_defaults,
    )
    optimize_model(model, options)
    return _proto(model)


def infer(model_or_path: Any, *, strict: bool = True) -> Any:
    """The model with every inferred type (an onnx.ModelProto); ``strict`` raises a ShapeError
    listing every inconsistency."""
    model = _model(model_or_path)
    infer_model(model, strict=strict)
    return _proto(model)


def convert(
    model_or_path: Any,
    opset: int | None = None,
    *,
    allow_cast: bool = False,
    dtype: str | None = None,
    keep_io_types: bool = True,
    weights: str | None = None,
    keep_float32: Collection[str] = (),
) -> Any:
    """The model converted to ``opset`` (an onnx.ModelProto), then to ``dtype`` ("float16",
    "bfloat16", or "float32" for a half model; graph inputs and outputs keep their type with
    ``keep_io_types``), or with its float32 weights stored as ``weights`` ("float16") behind
    Casts; AdapterError lists every node that cannot be converted. ``keep_float32``: node
    names, output names or op types that stay float32 under ``dtype``."""
    if opset is None and dtype is None and weights is None:
        raise OnnxForgeError("convert: give opset, dtype or weights")
    model = _model(model_or_path)
    if opset is not None:
        convert_model(model, opset, allow_cast=allow_cast)
    if dtype is not None:
        precision = ConvertPrecisionPass(
            dtype, keep_io_types=keep_io_types, keep_float32=keep_float32
        )
        PassManager([precision]).run(model)
    if weights is not None:
        PassManager([ConvertPrecisionPass(weights, weights_only=True)]).run(model)
    return _proto(model)


def fold(model_or_path: Any, *, fold_limit: int | None = None, pin_defaults: bool = False) -> Any:
    """The model with constants folded and what folding left unread removed (ModelProto)."""
    model = _model(model_or_path)
    if pin_defaults:
        pin_input_defaults(model)
    limit = {} if fold_limit is None else {"limit_bytes": fold_limit}
    fold_pipeline(**limit).run(model)
    return _proto(model)
