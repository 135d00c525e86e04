"""Constant below the versions of its attributes and element types; ConstantOfShape below 9."""

from __future__ import annotations

from adapter_check import check_conversion, header, op_types


def test_constant_value_ints_become_a_value_tensor_below_12() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 2, 3] y) {{
        s = Constant <value_ints = [0, 2, 3]> ()
        y = Reshape (x, s) }}"""
    model = check_conversion(text, 11)
    constant = [op for op in model.graph.ops if op.op_type == "Constant"]
    assert list(constant[0].attrs) == ["value"]


def test_constant_int64_below_9_becomes_an_initializer() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 6] y) {{
        c = Constant <value = float[1] {{2.0}}> ()
        y = Mul (x, c) }}"""
    model = check_conversion(text, 8)
    assert op_types(model) == ["Constant", "Mul"]
    text = f"""{header(13)} g (float[2, 6] x) => (float[3, 4] y) {{
        s = Constant <value = int64[2] {{3, 4}}> ()
        y = Reshape (x, s) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Reshape"] and model.graph.initializers[0].name == "s"


def test_constant_of_shape_with_a_known_shape_becomes_an_initializer_below_9() -> None:
    text = f"""{header(9)} g (float[2, 3] x) => (float[2, 3] y) {{
        s = Constant <value = int64[2] {{2, 3}}> ()
        c = ConstantOfShape <value = float[1] {{1.5}}> (s)
        y = Add (x, c) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Add"]
    (c,) = [v for v in model.graph.initializers if v.name == "c"]
    assert c.const.numpy().tolist() == [[1.5] * 3] * 2
