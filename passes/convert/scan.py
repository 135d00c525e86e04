"""Scan adapters: Scan-8's batch axis and sequence_lens <-> Scan-9's axes and directions
(9), non-negative axes below 11."""

from __future__ import annotations

__all__ = ["scan_8_9", "scan_9_8", "scan_11_10"]

from onnxforge.ir import Graph, Op, Value
from onnxforge.passes.convert._build import finish, rank_of, replace_outputs, squeeze, unsqueeze
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _rebuild(op: Op, graph: Graph, inputs: list[Value | None], attrs: dict) -> Op:
    """A new Scan reading ``inputs`` with ``attrs`` (the body moves to it)."""
    outs = [graph.fresh_name(f"{v.name}_scan") if v is not None else "" for v in op._outputs]
    new = graph.add_op(
        "Scan",
        inputs,
        n_outputs=len(outs),
        name=op.name,
        output_names=[n or graph.fresh_name("scan_unused") for n in outs],
        **attrs,
    )
    return new


@adapter("Scan", 8, 9)
def scan_8_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Scan-8 runs the body per batch entry: with no sequence_lens and a static batch of 1,
    the inputs lose that axis (Squeeze), Scan-9 runs once, the outputs get it back."""
    inputs = graph.inputs_of(op)
    if inputs and inputs[0] is not None:
        raise ctx.fail(op, "sequence_lens has no equivalent at 9")
    data = [v for v in inputs[1:]]
    for value in data:
        t = ctx.type(value)
        if t is None or t.shape is None or not t.shape or t.shape[0] != 1:
            raise ctx.fail(op, "Scan-8's batch axis must be a static 1 to go to 9")
    base = op.name or "scan"
    squeezed = [squeeze(graph, ctx, v, [0], base=base) for v in data]  # type: ignore[arg-type]
    attrs = {k: v for k, v in op.attrs.items() if k != "directions"}
    if op.attr("directions") is not None:
        attrs["scan_input_directions"] = list(op.attrs["directions"])
    new = _rebuild(op, graph, squeezed, attrs)  # type: ignore[arg-type]
    outputs = [unsqueeze(graph, ctx, v, [0], base=base) for v in graph.outputs_of(new)]  # type: ignore[arg-type]
    replace_outputs(graph, op, outputs)


@adapter("Scan", 9, 8)
def scan_9_8(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Scan-9 with scan axes 0 and forward outputs is Scan-8 over a batch of 1: the inputs
    get that axis (Unsqueeze), sequence_lens is omitted, the outputs lose it again."""
    for attr in ("scan_input_axes", "scan_output_axes", "scan_output_directions"):
        if any(int(a) != 0 for a in op.attr(attr, [])):
            raise ctx.fail(op, f"{attr} other than 0 has no equivalent at 8")
    base = op.name or "scan"
    inputs = [unsqueeze(graph, ctx, v, [0], base=base) for v in graph.inputs_of(op)]  # type: ignore[arg-type]
    attrs = {
        k: v
        for k, v in op.attrs.items()
        if k
        not in (
            "scan_input_axes",
            "scan_output_axes",
            "scan_output_directions",
            "scan_input_directions",
        )
    }
    if op.attr("scan_input_directions") is not None:
        attrs["directions"] = list(op.attrs["scan_input_directions"])
    new = _rebuild(op, graph, [None, *inputs], attrs)
    outputs = [squeeze(graph, ctx, v, [0], base=base) for v in graph.outputs_of(new)]  # type: ignore[arg-type]
    replace_outputs(graph, op, outputs)


@adapter("Scan", 11, 10)
def scan_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Negative scan axes are made non-negative: an input axis by the scan input's rank, an
    output axis by the scan output's."""
    n_scan = int(op.attrs["num_scan_inputs"])
    inputs = graph.inputs_of(op)
    outputs = graph.outputs_of(op)
    n_state = len(inputs) - n_scan
    for attr, values in (
        ("scan_input_axes", inputs[n_state:]),
        ("scan_output_axes", outputs[n_state:]),
    ):
        axes = op.attr(attr)
        if axes is None:
            continue
        fixed = []
        for axis, value in zip(axes, values, strict=False):
            rank = rank_of(ctx, value) if axis < 0 else 0
            if rank is None:
                raise ctx.fail(op, f"{attr} has {axis} and the rank is unknown")
            fixed.append(int(axis) + (rank if axis < 0 else 0))
        op.attrs[attr] = fixed
    finish(op, graph, ctx)
