"""TopK conversion: k attribute <-> input (10); largest, sorted, negative axis (11)."""

from __future__ import annotations

from adapter_check import check_conversion, header, op_types


def test_topk_k_becomes_an_input_at_10_and_an_attribute_again_at_9() -> None:
    text = f"""{header(9)} g (float[N, 6] x) => (float[N, 2] v, int64[N, 2] i) {{
        v, i = TopK <k = 2, axis = 1> (x) }}"""
    model = check_conversion(text, 10)
    assert model.graph.ops[0]._inputs[1].const.numpy().tolist() == [2]
    check_conversion(model, 9)
    assert model.graph.ops[0].attrs == {"k": 2, "axis": 1}


def test_topk_smallest_goes_below_11_as_topk_of_the_negation() -> None:
    text = f"""{header(11)} g (float[N, 6] x) => (float[N, 3] v, int64[N, 3] i) {{
        k = Constant <value = int64[1] {{3}}> ()
        v, i = TopK <largest = 0, sorted = 1, axis = -1> (x, k) }}"""
    model = check_conversion(text, 10)
    assert [t for t in op_types(model) if t != "Constant"] == ["Neg", "TopK", "Neg"]
    topk = [op for op in model.graph.ops if op.op_type == "TopK"][0]
    assert topk.attrs == {"axis": 1}
    assert [v.name for v in model.graph.outputs] == ["v", "i"]
