"""Graph.fresh_name: unique across the model however the names got there."""

from __future__ import annotations

from onnxforge.ir import Graph


def test_fresh_names_avoid_names_added_later_and_names_of_attached_bodies() -> None:
    g = Graph("main")
    x = g.add_value("x")
    assert g.fresh_name("y") == "y"  # collected now
    assert g.fresh_name("y") == "y_1"  # what it gave is taken
    g.add_value("z")
    assert g.fresh_name("z") == "z_1"  # added after the names were collected
    body = Graph("then")
    body.add_value("inner")
    body.outputs.append(body.add_value("b_out"))
    g.add_op("If", [x], then_branch=body, else_branch=Graph("else"))
    assert g.fresh_name("inner") == "inner_1"  # the attached body's names count
    assert body.fresh_name("x") == "x_1"  # from inside a body too


def test_a_name_that_went_away_stays_taken() -> None:
    g = Graph("main")
    op = g.add_op("Relu", [g.add_value("x")], output_names=["r"])
    g.fresh_name("unused")
    g.remove_op(op)
    assert g.fresh_name("r") in {"r", "r_1"}  # never a name still in use
    assert g.fresh_name("x") == "x_1"
