"""Which opset steps need no adapter: the schema changed, but the node is still valid and
means the same under the new version."""

from __future__ import annotations

__all__ = ["SEMANTIC_STEPS", "automatic_problem"]

from onnxforge import opset as schemas
from onnxforge.ir import Graph, Op, TensorType
from onnxforge.passes.convert._registry import ConvertContext

SEMANTIC_STEPS: frozenset[tuple[str, int]] = frozenset()
"""(op_type, since_version) whose meaning changes while the node stays structurally valid
(Softmax-13's axis covers one dim, not the flattened tail): only an adapter may cross them."""


def automatic_problem(op: Op, graph: Graph, ctx: ConvertContext, version: int) -> str | None:
    """Why ``op`` cannot cross the step at ``version`` (up: to it; down: from it) as it is,
    or None when it can."""
    if (op.op_type, version) in SEMANTIC_STEPS:
        return f"{op.op_type}-{version} changes what the node computes; no adapter for it"
    target = ctx.to_opset
    if not schemas.has_schema_at(op.op_type, target, op.domain):
        return f"{op.op_type} does not exist at opset {target}"
    dtypes = []
    for value in graph.inputs_of(op):
        t = ctx.type(value)
        dtypes.append(t.dtype if isinstance(t, TensorType) else None)
    return schemas.node_problem(
        op.op_type,
        target,
        attrs=set(op.attrs),
        n_inputs=len(op._inputs),
        n_outputs=len(op._outputs),
        input_dtypes=dtypes,
        domain=op.domain,
    )
