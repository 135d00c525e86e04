"""`optimize --for TOOLCHAIN`: what each downstream converter needs from a model, as data.

A profile says which default-domain opsets the toolchain's ONNX importer takes (the target is
the highest one the model can be converted to, never above the model's own), whether initializers
listed as graph inputs (IR-3 zoo models) become constants (converters take every graph input for
a runtime input: pnnx wants a shape for ``conv1_w_0``, onnx2torch a tensor), whether every input
needs a static shape, whether integer weights stay DequantizeLinear or become float weights, and
which op inputs it reads from initializers alone (a weight computed from constants is folded).
Every toolchain but onnxruntime runs inference only: a Dropout exported in training mode
becomes its input (OpenVINO 2026.4 refuses to convert it, MNN and pnnx ignore the flag).
Each entry cites what it rests on; ``benchmarks/downstream.py`` measures the result.
"""

from __future__ import annotations

__all__ = [
    "PROFILES",
    "Profile",
    "check_static_shapes",
    "choose_opset",
    "dynamic_rank_notes",
    "profile",
]

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import Model, TensorType

# onnx2torch 1.5.15's converter registry (onnx2torch.node_converters.registry), read from the
# installed package: the op versions it converts. A node whose schema version at the target
# opset is not listed has no converter ("Converter is not implemented").
_ONNX2TORCH: dict[str, tuple[int, ...]] = {
    "Abs": (6, 13), "Acos": (7,), "Add": (1, 6, 7, 13, 14), "And": (1, 7),
    "ArgMax": (11, 12, 13), "ArgMin": (11, 12, 13), "Asin": (7,), "Atan": (7,),
    "AveragePool": (7, 10, 11), "BatchNormalization": (9, 14, 15), "Cast": (9, 13),
    "Ceil": (6, 13), "Celu": (12,), "Clip": (6, 11, 12, 13), "Concat": (4, 11, 13),
    "Constant": (9, 11, 12, 13), "ConstantOfShape": (9,), "Conv": (1, 11),
    "ConvTranspose": (1, 11), "Cos": (7,), "CumSum": (11, 14), "DepthToSpace": (11, 13),
    "Div": (1, 6, 7, 13, 14), "Dropout": (10, 12, 13), "Einsum": (12,), "Elu": (6,),
    "Equal": (7, 11, 13), "Erf": (9, 13), "Exp": (6, 13), "Expand": (8, 13), "EyeLike": (9,),
    "Flatten": (9, 11, 13), "Floor": (6, 13), "Gather": (1, 11, 13),
    "GatherElements": (11, 13), "GatherND": (11, 12, 13), "Gemm": (9, 11, 13),
    "GlobalAveragePool": (1,), "Greater": (7, 9, 13), "GreaterOrEqual": (12,),
    "HardSigmoid": (1, 6), "HardSwish": (14,), "Identity": (1, 13, 14, 16),
    "InstanceNormalization": (1, 6), "IsInf": (10,), "IsNaN": (13,), "LRN": (1, 13),
    "LayerNormalization": (17,), "LeakyRelu": (1, 6, 16), "Less": (7, 9, 13),
    "LessOrEqual": (12,), "Log": (6, 13), "LogSoftmax": (1, 11, 13), "MatMul": (1, 9, 13),
    "Max": (8, 12, 13), "MaxPool": (8, 10, 11, 12), "Mean": (8, 13), "Min": (8, 12, 13),
    "Mod": (10, 13), "Mul": (1, 6, 7, 13, 14), "Neg": (1, 6, 13), "NonMaxSuppression": (10, 11),
    "NonZero": (13,), "Not": (1,), "Or": (1, 7), "PRelu": (7, 9, 16), "Pad": (2, 11, 13),
    "Pow": (1, 7, 12, 13, 15), "Range": (11,), "Reciprocal": (1, 6, 13),
    "ReduceL1": (1, 11, 13), "ReduceL2": (1, 11, 13), "ReduceLogSum": (1, 11, 13),
    "ReduceLogSumExp": (1, 11, 13), "ReduceMax": (1, 11, 12, 13), "ReduceMean": (1, 11, 13),
    "ReduceMin": (1, 11, 12, 13), "ReduceProd": (1, 11, 13), "ReduceSum": (1, 11, 13),
    "ReduceSumSquare": (1, 11, 13), "Relu": (6, 13, 14), "Reshape": (5, 13, 14),
    "Resize": (10, 11, 13), "RoiAlign": (10, 16), "Round": (11,), "ScatterND": (11, 13, 16),
    "Selu": (6,), "Shape": (1, 13, 15), "Sigmoid": (1, 6, 13), "Sign": (9, 13), "Sin": (7,),
    "Slice": (9, 10, 11, 13), "Softmax": (1, 11, 13), "Softplus": (1,), "Softsign": (1,),
    "Split": (2, 11, 13), "Sqrt": (1, 6, 13), "Squeeze": (1, 11, 13, 21),
    "Sub": (1, 6, 7, 13, 14), "Sum": (8, 13), "Tan": (7,), "Tanh": (6, 13), "Tile": (6, 13),
    "TopK": (1, 10, 11), "Transpose": (1, 13), "Unsqueeze": (1, 11, 13), "Where": (9, 16),
    "Xor": (1, 7),
}  # fmt: skip

# onnx2torch 1.5.15's node_converters/conv.py reads W and B as graph.initializers[name]: a
# weight computed from constants (the zoo's light_*.onnx: ConstantOfShape(conv1_w_0__SHAPE))
# is "KeyError: 'gpu_0/conv1_w_0'". BatchNormalization, Gemm, LayerNormalization and
# InstanceNormalization fall back to a functional module instead.
_ONNX2TORCH_INITIALIZERS: dict[str, tuple[int, ...]] = {"Conv": (1, 2), "ConvTranspose": (1, 2)}


@dataclass(frozen=True)
class Profile:
    """What one toolchain takes. ``ops``: the default-domain op versions it converts (empty:
    every op onnx defines at its opsets)."""

    name: str
    summary: str
    opsets: tuple[int, int] | None = None  # the importer's range; None: any the model has
    pin_defaults: bool = True
    static_shapes: bool = False
    weights: str = "as-is"  # integer weights: as-is, dequantize-linear or float
    embedded: bool = False  # weights inside the .onnx (the converter reads that file alone)
    ops: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # op type -> the input ports the converter reads from initializers alone
    initializer_inputs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # an inference toolchain: a Dropout whose constant training flag is on is its input
    dropout_as_inference: bool = True
    static_rank: bool = False  # refuses an If whose branches make different ranks
    gelu_scale_first: bool = False  # fuses the erf GELU into an approximate kernel

    def changes(self, *, opset: bool = True) -> list[str]:
        """What the profile does to a model, one line each (``onnxforge passes --for``);
        without ``opset``, all but the opset line (optimize's note says the opset chosen)."""
        lines = []
        if opset and (self.opsets is not None or self.ops):
            low, high = self.opsets or (1, 0)
            span = f"{low}..{high}" if self.opsets else "the model's"
            extra = f", where every op has a converter ({len(self.ops)} ops)" if self.ops else ""
            lines.append(f"converts to the highest opset in {span}{extra}")
        if self.pin_defaults:
            lines.append("pins initializers listed as graph inputs (as --pin-defaults)")
        if self.static_shapes:
            lines.append("needs a static shape for every input (--input-shape NAME=D1,D2,...)")
        if self.embedded:
            lines.append("writes the weights inside the .onnx file (no external data)")
        if self.initializer_inputs:
            ops = ", ".join(sorted(self.initializer_inputs))
            lines.append(f"folds weights computed from constants for {ops}, whatever their size")
        if self.dropout_as_inference:
            lines.append("computes a Dropout left in training mode as inference does (its input)")
        if self.gelu_scale_first:
            lines.append("writes the erf GELU as (x * 0.5) * (erf(x / sqrt 2) + 1)")
        if self.weights == "float":
            lines.append("folds integer weights and their DequantizeLinear to float weights")
        elif self.weights == "dequantize-linear":
            lines.append("writes integer weights as DequantizeLinear (Cast -> Mul fused)")
        return lines


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "onnxruntime",
            "the default: nothing beyond optimize (initializer inputs stay overridable)",
            pin_defaults=False,
            dropout_as_inference=False,  # onnxruntime computes training-mode Dropout
        ),
        Profile(
            "openvino",
            "OpenVINO convert_model: takes opsets up to 25 (measured with 2026.4); int8 weights "
            "as DequantizeLinear, which it keeps compressed (same outputs as Cast -> Mul in f32)",
            weights="dequantize-linear",
            # "CPU plug-in doesn't support If operation with dynamic rank": torch's squeeze of
            # a dim that is 1 unless the input is empty, If(dim == 1, Squeeze, Identity)
            static_rank=True,
        ),
        Profile(
            "ncnn",
            "pnnx to ncnn: shapes are pnnx's inputshape, so every input needs a static one; "
            "pnnx loads the .onnx alone (external data: 'model.onnx.data not found')",
            static_shapes=True,
            embedded=True,
        ),
        Profile(
            "mnn",
            "MNN's mnnconvert: constants pinned; the erf GELU in the order MNN computes op "
            "by op (its GELU kernel's erf is approximate: 4.7e-4 off)",
            gelu_scale_first=True,
        ),
        Profile(
            "torch",
            "onnx2torch 1.5.15: converts only the op versions its registry lists (opset 17 "
            "at most for most models: Split-18, Reduce*-18 have no converter)",
            opsets=(9, 21),
            ops=_ONNX2TORCH,
            weights="float",  # its registry has no DequantizeLinear
            initializer_inputs=_ONNX2TORCH_INITIALIZERS,
        ),
        Profile(
            "tflite",
            "onnx2tf to TensorFlow Lite: static input shapes",
            static_shapes=True,
        ),
        Profile(
            "tensorrt",
            "TensorRT's ONNX parser: constants pinned (not measured here: no GPU)",
        ),
    )
}


def profile(name: str) -> Profile:
    """The profile called ``name``; an error listing the others when there is none."""
    found = PROFILES.get(name)
    if found is None:
        raise OnnxForgeError(f"--for {name!r}: no such toolchain (one of {', '.join(PROFILES)})")
    return found


def _op_types(p: Profile, model: Model) -> set[str]:
    """The default-domain ops of the model the profile's toolchain will see: under
    weights="float" a DequantizeLinear of a constant is folded to a float weight first."""
    found = set()
    for _, op in model.ops():
        if op.domain not in ("", "ai.onnx"):
            continue
        x = op._inputs[0] if op._inputs else None
        folded = x is not None and x.const is not None
        if not (p.weights == "float" and op.op_type == "DequantizeLinear" and folded):
            found.add(op.op_type)
    return found


def _unsupported(
    ops: Iterable[str],
    opset: int,
    table: Mapping[str, tuple[int, ...]],
    lowers: Callable[[str], bool],
) -> list:
    """The ops whose schema version at ``opset`` the table lacks. An op that opset does not
    define yet is left to the conversion when ``lowers`` says it writes it in older ops
    (Gelu, LayerNorm); else it is missing there (DequantizeLinear below 10)."""
    missing = []
    for op_type in sorted(ops):
        try:
            since = schemas.since_version(op_type, opset, "")
        except OnnxForgeError:
            if not lowers(op_type):
                missing.append(f"{op_type} (not in opset {opset})")
            continue
        if since not in table.get(op_type, ()):
            missing.append(f"{op_type}-{since}")
    return missing


def choose_opset(
    p: Profile, model: Model, requested: int | None, *, lowers: Callable[[str], bool]
) -> int | None:
    """The default-domain opset to convert to: ``requested`` when given (checked against the
    range), else the model's when the profile takes it, else the highest in range at or below
    the model's where every op has a converter. None: keep the model's. ``lowers(op_type)``:
    the conversion writes that op in older ops below the opset that introduced it."""
    try:
        current = model.opset()
    except OnnxForgeError:
        return requested
    if p.opsets is None and not p.ops:
        return requested
    low, high = p.opsets or (1, current)
    if requested is not None:
        if not low <= requested <= high:
            raise OnnxForgeError(f"--opset {requested}: {p.name} takes opsets {low}..{high}")
        return requested
    ops = _op_types(p, model)
    top = min(current, high)
    # down from the model's opset first (conversion down decomposes what is new), then up
    for target in [*range(top, low - 1, -1), *range(max(top + 1, low), high + 1)]:
        if not p.ops or not _unsupported(ops, target, p.ops, lowers):
            return None if target == current else target
    missing = _unsupported(ops, max(low, top), p.ops, lowers)
    raise OnnxForgeError(
        f"{p.name} has no converter for {', '.join(missing)} at any opset in {low}..{high}"
    )


def check_static_shapes(p: Profile, model: Model, given: Mapping[str, object]) -> None:
    """Every runtime input of a static-shape toolchain has one, from the model or --input-shape;
    else an error naming each input that needs one."""
    if not p.static_shapes:
        return
    missing = []
    for value in model.graph.inputs:
        if value.const is not None or value.name in given:
            continue
        t = value.type
        if not isinstance(t, TensorType) or t.shape is None:
            missing.append(f"{value.name} (rank unknown)")
        elif not all(isinstance(d, int) for d in t.shape):
            dims = ",".join(str(d) if isinstance(d, int) else "?" for d in t.shape)
            missing.append(f"{value.name} [{dims}]")
    if missing:
        raise OnnxForgeError(
            f"{p.name} needs static input shapes; give --input-shape NAME=D1,D2,... for: "
            + "; ".join(missing)
        )


def dynamic_rank_notes(p: Profile, model: Model) -> list[str]:
    """For a toolchain that needs a static rank: each If whose branches make outputs of
    different ranks, and what fixes it. The rank follows the input's shape, so the If stays
    (assuming the dim is never 0 would break the model on empty inputs, as onnxslim's
    output does); a static --input-shape folds it."""
    if not p.static_rank:
        return []
    dynamic = [
        v.name
        for v in model.graph.inputs
        if v.const is None
        and isinstance(v.type, TensorType)
        and (v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape))
    ]
    found = []
    for _, op in model.ops():
        if op.op_type != "If" or op.domain not in ("", "ai.onnx"):
            continue
        branches = list(op.subgraphs())
        for k in range(len(op._outputs)):
            ranks = set()
            for body in branches:
                t = body.outputs[k].type if k < len(body.outputs) else None
                shape = t.shape if isinstance(t, TensorType) else None
                ranks.add(None if shape is None else len(shape))
            if len(ranks) > 1:
                shown = " or ".join(
                    "unknown" if r is None else str(r)
                    for r in sorted(ranks, key=lambda r: -1 if r is None else r)
                )
                found.append(
                    f"If {op.name or op.op_type!r} makes rank {shown} as the input's shape says; "
                    f"{p.name} needs one rank: give --input-shape NAME=D1,D2,... for "
                    + (", ".join(dynamic) or "the inputs")
                )
                break
    return found
