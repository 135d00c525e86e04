"""The classification of every default-domain schema step (passes/convert/_classify.py): each
step, each direction, is crossed by an adapter, automatically for a stated reason, or refused
for a stated reason; and the automatic check's node-level refusals.

``pytest -s tests/convert/test_classify.py -k table`` prints the coverage table."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from onnx import defs, helper

import onnxforge.passes.convert  # noqa: F401  (registers the adapters)
from onnxforge import opset
from onnxforge.errors import AdapterError
from onnxforge.passes.convert import ConvertContext, convert, find_adapter
from onnxforge.passes.convert._classify import (
    EXPLAINED,
    NEW_ATTRIBUTE_VALUES,
    SEMANTIC_DOWN,
    SEMANTIC_STEPS,
    automatic_problem,
    coverage,
)
from onnxforge.testing import model_from_text


def test_every_step_is_adapted_accepted_or_refused_with_a_reason() -> None:
    missing = [str(row) for row in coverage() if row.how == "missing"]
    assert not missing, "\n".join(missing)


def test_coverage_table() -> None:
    rows = coverage()
    for row in rows:
        print(row)
    counts = Counter(row.how for row in rows)
    steps = {(r.op_type, r.version) for r in rows}
    print(f"{len(steps)} schema steps, {len(rows)} step-directions: {dict(counts)}")
    assert counts["adapter"] and counts["automatic"] and counts["refused"]


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("SEMANTIC_STEPS", SEMANTIC_STEPS),
        ("SEMANTIC_DOWN", SEMANTIC_DOWN),
        ("EXPLAINED", set(EXPLAINED)),
        ("NEW_ATTRIBUTE_VALUES", set(NEW_ATTRIBUTE_VALUES)),
    ],
)
def test_classification_tables_name_real_steps(name: str, table: set) -> None:
    wrong = [k for k in table if k[1] not in opset.schema_versions(k[0]) or k[1] == 1]
    assert not wrong, f"{name}: not a step: {wrong}"


def test_semantic_steps_have_adapters_both_ways() -> None:
    lacking = [
        f"{op}-{v} {'up' if up else 'down'}"
        for op, v in SEMANTIC_STEPS
        for up in (True, False)
        if (find_adapter(op, v - 1, v) if up else find_adapter(op, v, v - 1)) is None
    ]
    assert not lacking


def test_semantic_down_steps_have_downgrade_adapters() -> None:
    assert not [f"{op}-{v}" for op, v in SEMANTIC_DOWN if find_adapter(op, v, v - 1) is None]


def _signature(schema: defs.OpSchema) -> tuple:
    attrs = tuple(
        sorted(
            (
                name,
                int(a.type),
                a.required,
                repr(helper.get_attribute_value(a.default_value))
                if a.default_value.name
                else None,
            )
            for name, a in schema.attributes.items()
        )
    )
    params = tuple((p.name, p.type_str, int(p.option)) for p in [*schema.inputs, *schema.outputs])
    types = tuple(
        sorted(
            (c.type_param_str, tuple(sorted(c.allowed_type_strs))) for c in schema.type_constraints
        )
    )
    return (
        attrs,
        params,
        types,
        schema.min_input,
        schema.max_input,
        schema.min_output,
        schema.max_output,
    )


def test_every_description_only_step_was_read_and_explained() -> None:
    """A step onnx.defs shows no difference for (only the text changed) is either explained
    or adapted both ways: someone read the change note."""
    by_op: dict[str, dict[int, defs.OpSchema]] = defaultdict(dict)
    for schema in defs.get_all_schemas_with_history():
        if schema.domain == "":
            by_op[schema.name][schema.since_version] = schema
    silent = []
    for op, versions in by_op.items():
        ordered = sorted(versions)
        for old, new in zip(ordered, ordered[1:], strict=False):
            if _signature(versions[old]) != _signature(versions[new]):
                continue
            both = find_adapter(op, new - 1, new) and find_adapter(op, new, new - 1)
            if (op, new) not in EXPLAINED and not both and not versions[new].deprecated:
                silent.append(f"{op}-{new}")
    assert not silent


# -- the automatic check, node by node -----------------------------------------------------
def _one_op(text: str):
    model = model_from_text(text)
    return model, model.graph, model.graph.ops[0]


def test_a_default_the_node_relies_on_that_changes_is_a_problem() -> None:
    _, graph, op = _one_op(
        '<ir_version: 3, opset_import: ["" : 5]> g (float[2] x) => (float[2] y) { y = Selu (x) }'
    )
    problem = automatic_problem(op, graph, ConvertContext(5, 6), 6)
    assert problem is not None and "alpha is unset and its default changes" in problem
    op.attrs.update(alpha=1.5, gamma=1.0)
    assert automatic_problem(op, graph, ConvertContext(5, 6), 6) is None


def test_a_semantic_step_without_an_adapter_is_a_problem() -> None:
    _, graph, op = _one_op(
        '<ir_version: 8, opset_import: ["" : 13]> g (float[2, 3] x) => (float[2, 3] y) '
        "{ y = Softmax (x) }"
    )
    problem = automatic_problem(op, graph, ConvertContext(13, 12), 13)
    assert problem == "Softmax-13 changes what the node computes; no adapter for it"


def test_inputs_bound_to_one_type_parameter_must_share_their_type_going_down() -> None:
    text = """<ir_version: 8, opset_import: ["" : 15]> g (float[2] a, double[2] b)
        => (float[2] y) { y = Pow (a, b) }"""
    with pytest.raises(AdapterError, match=r"Pow-7 binds 'Y' and 'X' to one type T"):
        convert(model_from_text(text), 11)


def test_an_output_type_the_target_lacks_is_a_problem() -> None:
    text = """<ir_version: 8, opset_import: ["" : 13]> g (float[2] x) => (bfloat16[2] y) {
        y = Cast <to = 16> (x) }"""
    with pytest.raises(
        AdapterError, match=r"Cast-9 output 'output' does not allow element type 16"
    ):
        convert(model_from_text(text), 12)


def test_an_attribute_value_the_older_version_lacks_is_a_problem() -> None:
    text = """<ir_version: 8, opset_import: ["" : 19]> g (float[1, 1, 2, 2] x)
        => (float[1, 1, 4, 4] y) {
        s = Constant <value = float[4] {1.0, 1.0, 2.0, 2.0}> ()
        y = Resize <coordinate_transformation_mode = "half_pixel_symmetric"> (x, , s) }"""
    with pytest.raises(
        AdapterError,
        match="coordinate_transformation_mode='half_pixel_symmetric' exists only from Resize-19",
    ):
        convert(model_from_text(text), 18)


def test_every_blocking_node_is_listed_at_once_with_op_name_and_versions() -> None:
    text = """<ir_version: 8, opset_import: ["" : 19]> g (float[3] x)
        => (bfloat16[3] a, bfloat16[3] b, float[8] c) {
        a = Cast <to = 16> (x)
        b = Cast <to = 16> (x)
        pads = Constant <value = int64[2] {4, 1}> ()
        c = Pad <mode = "wrap"> (x, pads) }"""
    model = model_from_text(text)
    for op, name in zip(model.graph.ops, ["first", "second", "k", "pad"], strict=True):
        op.name = name
    with pytest.raises(AdapterError) as info:
        convert(model, 12)
    message = str(info.value)
    assert "3 blocking node(s)" in message
    assert "Cast node 'first' 13 -> 12" in message and "Cast node 'second' 13 -> 12" in message
    assert "Pad node 'pad' 19 -> 18" in message


def test_a_sequence_output_the_older_if_lacks_is_a_problem() -> None:
    text = """<ir_version: 8, opset_import: ["" : 13]> g (bool c, float[2] x)
        => (seq(float[2]) y) {
        y = If (c) <
            then_branch = t () => (seq(float[2]) a) { a = SequenceConstruct (x) },
            else_branch = e () => (seq(float[2]) b) { b = SequenceConstruct (x, x) }> }"""
    with pytest.raises(AdapterError, match="If-11 output 'outputs' does not take a seq"):
        convert(model_from_text(text), 12)


def test_a_tensor_where_the_older_version_takes_only_optionals_is_a_problem() -> None:
    text = """<ir_version: 8, opset_import: ["" : 18]> g (float[2] x) => (float[2] y) {
        y = OptionalGetElement (x) }"""
    with pytest.raises(
        AdapterError, match="OptionalGetElement-15 input 'input' does not take a tensor"
    ):
        convert(model_from_text(text), 15)
