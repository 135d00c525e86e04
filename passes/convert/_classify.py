"""Which opset steps need no adapter: the schema changed, but the node is still valid and
means the same under the new version; and, for the coverage table, how every step of every
default-domain op is crossed in each direction."""

from __future__ import annotations

__all__ = [
    "EXPLAINED",
    "NEW_ATTRIBUTE_VALUES",
    "NOT_EXPRESSIBLE",
    "SEMANTIC_DOWN",
    "SEMANTIC_STEPS",
    "StepClass",
    "automatic_problem",
    "classify",
    "coverage",
    "structural_problem",
]

from dataclasses import dataclass
from typing import Literal

from onnxforge import opset as schemas
from onnxforge.ir import Graph, Op, OpaqueType, TensorType, Value
from onnxforge.passes.convert._registry import ConvertContext, find_adapter

_NEGATIVE_AXES = (
    "negative axes accepted (counting from the back); going down they must be made "
    "non-negative from the known rank"
)
_LEGACY_BROADCAST = (
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Greater",
    "Less",
)

SEMANTIC_STEPS: frozenset[tuple[str, int]] = frozenset(
    {
        # axis: Softmax-13 normalizes along one axis, Softmax-1/11 over the flattened tail.
        ("Softmax", 13),
        ("LogSoftmax", 13),
        ("Hardmax", 13),
        # mode values renamed (bilinear -> linear, bicubic -> cubic).
        ("GridSample", 20),
        # new coordinate_transformation_mode defaults to half_pixel; before, output_half_pixel.
        ("RoiAlign", 16),
        # scale and bias per channel, not per group.
        ("GroupNormalization", 21),
        # the attribute 'to' was a string, is an int.
        ("Cast", 6),
        # p was a float, is an int.
        ("GlobalLpPool", 2),
        ("LpPool", 2),
        # Scan-8 has a batch axis and sequence_lens; Scan-9 has neither.
        ("Scan", 9),
        # legacy broadcast=1/axis (B broadcast from an axis) replaced by numpy broadcasting.
        *((op, 7) for op in _LEGACY_BROADCAST),
        # Gemm-6 broadcasts C only with broadcast=1.
        ("Gemm", 7),
        # is_test=0 (the default) means training mode before 7.
        ("BatchNormalization", 7),
        ("Dropout", 7),
        # spatial=0 normalizes per activation, not per channel.
        ("BatchNormalization", 9),
        # Resize-10 is 'asymmetric'/'round_prefer_floor'... under Resize-11's names.
        ("Resize", 11),
        # ceil_mode: a last window starting in the right padding is dropped from 22.
        ("AveragePool", 22),
        ("MaxPool", 22),
    }
)
"""(op_type, since_version) whose meaning changes while the node stays structurally valid
(Softmax-13's axis covers one dim, not the flattened tail): only an adapter may cross them,
in either direction."""

SEMANTIC_DOWN: frozenset[tuple[str, int]] = frozenset(
    {
        # negative axes, valid only from 11
        *(
            (op, 11)
            for op in (
                "ArgMax",
                "ArgMin",
                "Compress",
                "Concat",
                "Flatten",
                "Hardmax",
                "LogSoftmax",
                "Softmax",
                "OneHot",
                "Scan",
                "Slice",
                "Split",
                "Squeeze",
                "Unsqueeze",
                "TopK",
                *schemas.REDUCE_OPS,
            )
        ),
        # multidirectional broadcasting of the inputs, from 8 (same shapes before)
        ("Max", 8),
        ("Min", 8),
        ("Mean", 8),
        ("Sum", 8),
        # slope broadcast to X, from 7 (same shape or one element before)
        ("PRelu", 7),
        # per-axis scale and zero point, from 13 (scalars before)
        ("QuantizeLinear", 13),
        ("DequantizeLinear", 13),
        # floats with fmod=0 (floor modulus), from 28 (fmod=1 only before)
        ("Mod", 28),
    }
)
"""Steps where the newer schema accepts more than the older one while the node stays
structurally valid (negative axes, broadcasting, per-axis quantization): going up is
automatic, going down only an adapter may cross."""

NEW_ATTRIBUTE_VALUES: dict[tuple[str, int], dict[str, frozenset[object]]] = {
    ("Pad", 19): {"mode": frozenset({"wrap"})},
    ("Resize", 19): {"coordinate_transformation_mode": frozenset({"half_pixel_symmetric"})},
    ("ScatterElements", 18): {"reduction": frozenset({"max", "min"})},
    ("ScatterND", 18): {"reduction": frozenset({"max", "min"})},
}
"""Attribute values a version accepts first: a node using one cannot go below it."""

_SAME_DEFAULTS: frozenset[tuple[str, int, str]] = frozenset(
    {
        ("GRU", 3, "direction"),  # GRU-1's default 'foward' is a typo of 'forward'
    }
)

EXPLAINED: dict[tuple[str, int], str] = {
    **{(op, 11): _NEGATIVE_AXES for op, v in SEMANTIC_DOWN if v == 11},
    ("OneHot", 11): _NEGATIVE_AXES + "; negative indices (invalid before) count from the back",
    ("Max", 8): "inputs broadcast (numpy), before 8 they had one shape",
    ("Min", 8): "inputs broadcast (numpy), before 8 they had one shape",
    ("Mean", 8): "inputs broadcast (numpy), before 8 they had one shape",
    ("Sum", 8): "inputs broadcast (numpy), before 8 they had one shape",
    ("PRelu", 7): "slope broadcasts to X (before: same shape or one element)",
    ("Gather", 11): "index bounds documented; negative indices were accepted before",
    ("Gemm", 6): "C no longer described as computed in place",
    ("If", 11): "branches may yield outputs of different shapes; no runtime relied on equality",
    ("Loop", 11): "loop-carried values may be none (down: such nodes are refused by arity)",
    ("Mod", 28): "fmod=0 (floor modulus) accepted for floats; special cases documented",
    ("DepthToSpace", 28): "a function definition added; same computation",
    ("NegativeLogLikelihoodLoss", 13): "description reformatted; same computation",
    ("NonMaxSuppression", 11): "boxes with IoU equal to the threshold documented as kept",
    ("Pad", 19): "mode 'wrap' added (down: nodes using it are refused)",
    ("Resize", 19): "coordinate_transformation_mode 'half_pixel_symmetric' added (down: refused)",
    ("ScatterElements", 18): "reduction 'max' and 'min' added (down: a masked reduction)",
    ("ScatterND", 18): "reduction 'max' and 'min' added (down: a masked reduction)",
    ("Clip", 6): "min/max defaults written as -/+FLT_MAX: the same 'no bound' as before",
    ("GRU", 3): "direction's default typo fixed; linear_before_reset=0 is the old behaviour",
    ("Constant", 11): "value became optional next to the new sparse_value",
    ("Gemm", 11): "C became optional (down: an omitted C is refused by arity)",
    ("Resize", 13): "roi and scales became optional (down: omitted ones refused by arity)",
    ("BatchNormalization", 15): (
        "scale/bias and mean/var may differ in float type from X (T1, T2); down: the type "
        "check's binding of T refuses mixed types"
    ),
    ("OptionalHasElement", 18): "the input became optional (down: nodes without it refused)",
    **{
        (op, 11): "auto_pad SAME_* and the default strides/dilations documented; same result"
        for op in ("AveragePool", "Conv", "ConvTranspose", "LpPool", "MaxPool", "MaxUnpool")
    },
}
"""Why crossing a step automatically is right where the schema diff alone does not say it:
description-only changes, widened semantics (with SEMANTIC_DOWN), relaxed arity."""

NOT_EXPRESSIBLE: dict[tuple[str, int, str], str] = {}
"""(op_type, since_version, "up"|"down") that no adapter can cross, with the reason."""


def structural_problem(op: Op, graph: Graph, ctx: ConvertContext) -> str | None:
    """Why ``op`` as it is now is not a valid node of the schema ``ctx.to_opset`` selects:
    attributes, arity, element types of inputs and outputs, attribute values that version
    does not know yet."""
    target = ctx.to_opset
    if not schemas.has_schema_at(op.op_type, target, op.domain):
        return f"{op.op_type} does not exist at opset {target}"
    if not ctx.upgrading:
        for version in _versions_crossed(op, ctx):
            for name, values in NEW_ATTRIBUTE_VALUES.get((op.op_type, version), {}).items():
                value = op.attr(name)
                value = value.decode() if isinstance(value, bytes) else value
                if value in values:
                    return f"{name}={value!r} exists only from {op.op_type}-{version}"
    return schemas.node_problem(
        op.op_type,
        target,
        attrs={k for k, v in op.attrs.items() if v is not None},
        n_inputs=_arity(op._inputs),
        n_outputs=_arity(op._outputs),
        input_dtypes=[_dtype(ctx, v) for v in graph.inputs_of(op)],
        output_dtypes=[_dtype(ctx, v) for v in graph.outputs_of(op)],
        input_kinds=[_kind(v) for v in graph.inputs_of(op)],
        output_kinds=[_kind(v) for v in graph.outputs_of(op)],
        domain=op.domain,
    )


def automatic_problem(op: Op, graph: Graph, ctx: ConvertContext, version: int) -> str | None:
    """Why ``op`` cannot cross the step at ``version`` (up: to it; down: from it) as it is,
    or None when it can."""
    key = (op.op_type, version)
    if key in SEMANTIC_STEPS or (not ctx.upgrading and key in SEMANTIC_DOWN):
        return f"{op.op_type}-{version} changes what the node computes; no adapter for it"
    problem = structural_problem(op, graph, ctx)
    if problem is not None:
        return problem
    return _default_problem(op, ctx, version)


def _default_problem(op: Op, ctx: ConvertContext, version: int) -> str | None:
    """An attribute the node leaves unset whose default differs between the two schemas."""
    if not schemas.has_schema_at(op.op_type, ctx.from_opset, op.domain):
        return None
    for name in schemas.schema_change(op.op_type, version, op.domain).defaults_changed:
        if op.attr(name) is not None or (op.op_type, version, name) in _SAME_DEFAULTS:
            continue
        before = schemas.attribute_default(op.op_type, ctx.from_opset, name, op.domain)
        after = schemas.attribute_default(op.op_type, ctx.to_opset, name, op.domain)
        return (
            f"{name} is unset and its default changes from {before!r} to {after!r}; "
            "no adapter for it"
        )
    return None


def _versions_crossed(op: Op, ctx: ConvertContext) -> list[int]:
    low, high = sorted((ctx.from_opset, ctx.to_opset))
    return [v for v in schemas.schema_versions(op.op_type, op.domain) if low < v <= high]


def _arity(values: list) -> int:
    """The count ONNX sees: trailing omitted optionals do not count."""
    n = len(values)
    while n and values[n - 1] is None:
        n -= 1
    return n


_KINDS = {"sequence_type": "seq", "optional_type": "optional", "map_type": "map"}


def _kind(value: Value | None) -> str | None:
    """What a value holds: "tensor", "seq", "optional", "map"; None when unknown."""
    t = value.type if value is not None else None
    if isinstance(t, TensorType) or (value is not None and value.const is not None):
        return "tensor"
    return _KINDS.get(t.kind) if isinstance(t, OpaqueType) else None


def _dtype(ctx: ConvertContext, value: object) -> int | None:
    t = ctx.type(value)  # type: ignore[arg-type]
    return t.dtype if isinstance(t, TensorType) else None


# -- the coverage table --------------------------------------------------------------------
Direction = Literal["up", "down"]


@dataclass(frozen=True, slots=True)
class StepClass:
    """How one schema step is crossed in one direction: by an adapter, automatically (with
    the reason that makes it right), refused (with the reason), or "missing" (a change that
    needs an adapter nobody wrote)."""

    op_type: str
    version: int
    direction: Direction
    how: Literal["adapter", "automatic", "refused", "missing"]
    reason: str

    def __str__(self) -> str:
        arrow = (
            f"{self.version - 1} -> {self.version}"
            if self.direction == "up"
            else f"{self.version} -> {self.version - 1}"
        )
        return f"{self.op_type:28} {arrow:9} {self.how:9} {self.reason}"


def classify(op_type: str, version: int, direction: Direction) -> StepClass:
    """How a node crosses the step at ``version`` (up: from the schema before; down: to it)."""
    up = direction == "up"
    fn = (
        find_adapter(op_type, version - 1, version)
        if up
        else find_adapter(op_type, version, version - 1)
    )

    def result(
        how: Literal["adapter", "automatic", "refused", "missing"], reason: str
    ) -> StepClass:
        return StepClass(op_type, version, direction, how, reason)

    if fn is not None:
        return result("adapter", fn.__name__)
    blocked = NOT_EXPRESSIBLE.get((op_type, version, direction))
    if blocked is not None:
        return result("refused", blocked)
    change = schemas.schema_change(op_type, version)
    if change.introduced:
        return result("refused", f"no {op_type} before opset {version}")
    if change.deprecated:
        if up:
            return result("missing", f"{op_type} is deprecated from opset {version}")
        return result("automatic", f"no valid {op_type} node at opset {version}")
    key = (op_type, version)
    if key in SEMANTIC_STEPS or (not up and key in SEMANTIC_DOWN):
        return result("missing", "the meaning changes; an adapter must cross it")
    structural = []
    if change.attribute_kinds_changed:
        structural.append(f"attribute type of {', '.join(change.attribute_kinds_changed)}")
    if change.inputs_changed and key not in EXPLAINED:
        structural.append("inputs")
    if change.outputs_changed and key not in EXPLAINED:
        structural.append("outputs")
    if up:
        structural += [f"required attribute {a}" for a in change.required_attributes_added]
        structural += [f"{a} now required" for a in change.attributes_now_required]
        structural += [f"attribute {a} removed" for a in change.attributes_removed]
    else:
        structural += [f"required attribute {a}" for a in change.required_attributes_removed]
    if change.defaults_changed and not all(
        (op_type, version, a) in _SAME_DEFAULTS for a in change.defaults_changed
    ):
        structural.append(f"default of {', '.join(change.defaults_changed)}")
    if structural:
        return result("missing", "structural change: " + "; ".join(structural))
    reasons = []
    if key in EXPLAINED:
        reasons.append(EXPLAINED[key])
    if change.types_widened:
        reasons.append(
            "element types widened" if up else "the type check refuses types added at this step"
        )
    if change.types_narrowed:
        reasons.append(
            "the type check refuses types removed at this step" if up else "types narrowed"
        )
    for what, names in (("attribute", change.attributes_added), ("input", change.inputs_added)):
        if names:
            reasons.append(
                f"optional {what} {', '.join(names)} added"
                + (" (its default is the old behaviour)" if up else "; nodes setting it refused")
            )
    if change.outputs_added:
        reasons.append(
            f"optional output {', '.join(change.outputs_added)} added"
            + ("" if up else "; nodes producing it refused")
        )
    if change.attributes_now_optional:
        reasons.append(f"{', '.join(change.attributes_now_optional)} became optional")
    if not up and change.attributes_removed:
        reasons.append(f"the older optional {', '.join(change.attributes_removed)} stays unset")
    if not reasons:
        return result("missing", "only descriptions changed; say why in EXPLAINED")
    return result("automatic", "; ".join(reasons))


def coverage() -> list[StepClass]:
    """Every schema step of every default-domain op, both directions, as ``classify`` sees it
    with the adapters registered now (import onnxforge.passes.convert first)."""
    rows = []
    for op_type in schemas.op_types():
        for version in schemas.schema_versions(op_type):
            if version == 1:
                continue
            introduced = schemas.schema_change(op_type, version).introduced
            for direction in ("down",) if introduced else ("up", "down"):
                rows.append(classify(op_type, version, direction))  # type: ignore[arg-type]
    return rows
