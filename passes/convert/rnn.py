"""RNN, GRU and LSTM below 14: layout=1 (batch first) becomes Transposes around a layout-0
node."""

from __future__ import annotations

__all__ = ["rnn_14_13"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import emit, finish, reroute_output
from onnxforge.passes.convert._registry import ConvertContext, adapter

_STATE_INPUTS = {"RNN": (5,), "GRU": (5,), "LSTM": (5, 6)}  # initial_h (and initial_c)


@adapter(("RNN", "GRU", "LSTM"), 14, 13)
def rnn_14_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """X [batch, seq, in] and the initial states [batch, dirs, hidden] are transposed to the
    sequence-first layout; Y [seq, dirs, batch, hidden] and the final states back."""
    if int(op.attrs.pop("layout", 0) or 0):
        base = op.name or op.op_type.lower()
        inputs = graph.inputs_of(op)
        for port in (0, *_STATE_INPUTS[op.op_type]):
            value = inputs[port] if port < len(inputs) else None
            if value is not None:
                graph.set_input(
                    op, port, emit(graph, "Transpose", [value], base=base, perm=[1, 0, 2])
                )
        for port, perm in enumerate(([2, 0, 1, 3], [1, 0, 2], [1, 0, 2])):
            outputs = graph.outputs_of(op)
            if port < len(outputs) and outputs[port] is not None:
                reroute_output(
                    graph,
                    op,
                    port,
                    lambda inner, perm=perm: emit(
                        graph, "Transpose", [inner], base=base, perm=perm
                    ),
                )
    finish(op, graph, ctx)
