"""Broken graphs, absurd shapes and sizes through every command: one clear line naming the
file, exit 1 or 2, bounded time and memory, nothing left behind (tests/hostile/harness.py)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from hostile import cases
from hostile.harness import COMMANDS, assert_clean, run_all, run_command

INFERRING = frozenset({"infer", "fold", "optimize", "check"})


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"
    model_dir.mkdir()
    out_dir.mkdir()
    return model_dir, out_dir


@pytest.mark.parametrize("name", sorted(cases.GRAPH_CASES))
def test_an_invalid_model_is_refused_by_every_command(name: str, folders) -> None:
    model_dir, out_dir = folders
    build, codes = cases.GRAPH_CASES[name]
    path = build(model_dir)
    before = sorted(model_dir.iterdir())
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, codes, out_dir)
    assert sorted(model_dir.iterdir()) == before


@pytest.mark.parametrize("name", sorted(cases.SHAPE_CASES))
def test_a_model_only_inference_finds_wrong_is_refused_by_every_command_that_infers(
    name: str, folders
) -> None:
    model_dir, out_dir = folders
    path = cases.SHAPE_CASES[name](model_dir)
    for outcome in run_all(path, out_dir):
        codes = {1} if outcome.command in INFERRING else {0, 1}
        assert_clean(outcome, codes, out_dir)


@pytest.mark.parametrize("name", sorted(cases.LARGE_CASES))
def test_constants_too_large_to_make_are_never_made(name: str, folders) -> None:
    """Valid models whose ConstantOfShape / Expand / Tile / Range would make 2^40 elements or
    more: every command succeeds in bounded time and memory, and fold and optimize leave the
    op that makes the constant in place (the result stays small)."""
    model_dir, out_dir = folders
    path = cases.LARGE_CASES[name](model_dir)
    out = out_dir / "out.onnx"
    for command in COMMANDS:
        outcome = run_command(command, path, out)
        assert_clean(outcome, {0}, out_dir)
        if command in ("fold", "optimize"):
            assert out.stat().st_size < 4096, outcome
            ops = {n.op_type for n in onnx.load(out).graph.node}
            assert ops & {"ConstantOfShape", "Expand", "Tile", "Range"}, outcome
        for written in out_dir.iterdir():
            written.unlink()


def test_thousands_of_nested_subgraphs_are_refused_with_the_reason(folders) -> None:
    model_dir, out_dir = folders
    path = cases.deeply_nested_subgraphs(model_dir)
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, {2}, out_dir)
        assert "nest deeper than protobuf reads" in outcome.stdout + outcome.stderr


def test_the_deepest_nesting_protobuf_reads_works_in_every_command(folders) -> None:
    """31 levels of If (protobuf's 100 message levels): every command succeeds; Python's
    recursion limit is not what bounds it."""
    model_dir, out_dir = folders
    path = model_dir / "nested31.onnx"
    path.write_bytes(cases.nested_if_bytes(31))
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, {0}, out_dir)


def test_a_fifo_in_place_of_the_model_is_refused_without_waiting(folders) -> None:
    model_dir, out_dir = folders
    fifo = model_dir / "model.onnx"
    os.mkfifo(fifo)
    for outcome in run_all(fifo, out_dir):
        assert_clean(outcome, {2}, out_dir)
        assert "not a regular file" in outcome.stderr


def test_checking_a_model_with_a_huge_input_refuses_to_make_the_input(folders) -> None:
    """optimize --check and check --verify make random inputs: a declared dim of 2^40 is
    refused (one line, exit 1), not allocated."""
    model_dir, out_dir = folders
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1 << 40])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1 << 40])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = model_dir / "huge_input.onnx"
    onnx.save(model, path)
    out = out_dir / "out.onnx"
    for args in (
        ["optimize", str(path), "-o", str(out), "--check", "1"],
        ["check", str(path), "--verify", "onnxruntime"],
    ):
        outcome = run_command(args[0], path, out, args=args)
        assert_clean(outcome, {1}, out_dir)
        assert "more than" in outcome.stdout + outcome.stderr, outcome
