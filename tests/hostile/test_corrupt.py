"""Truncated and damaged copies of real models (the zoo's light models and the example), 300 of
them from a fixed seed, through every command: exit 2 when the bytes are no model, 1 when the
model they make is invalid, 0 only when the damage left a valid model (a flipped weight bit);
never a traceback, always in bounded time and memory, nothing left behind."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hostile import cases
from hostile.harness import assert_clean, run_all

from onnxforge._validate import model_problems
from onnxforge.io import load

SEED = 7
PER_MODEL = 30
SOURCES = {p.stem: p for p in cases.zoo_models()}


@functools.cache
def _copies(stem: str) -> list[tuple[str, bytes]]:
    return cases.corrupted(SOURCES[stem], PER_MODEL, SEED)


CASES = [(stem, i) for stem in sorted(SOURCES) for i in range(PER_MODEL)]


@pytest.mark.parametrize(("stem", "index"), CASES, ids=[f"{s}-{i}" for s, i in CASES])
def test_a_damaged_model_gets_a_clear_answer_from_every_command(
    stem: str, index: int, tmp_path: Path
) -> None:
    name, data = _copies(stem)[index]
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"
    model_dir.mkdir()
    out_dir.mkdir()
    path = model_dir / f"{name}.onnx"
    path.write_bytes(data)
    codes = {1, 2} if "truncated" in name else {0, 1, 2}
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, codes, out_dir)
        if outcome.exit_code == 0 and outcome.command != "check":
            assert model_problems(load(path)) == [], outcome  # valid, so 0 was right
    assert sorted(p.name for p in model_dir.iterdir()) == [path.name]
    assert path.read_bytes() == data


def test_the_damaged_copies_are_the_same_every_run() -> None:
    first = cases.corrupted(SOURCES["tiny_convnet"], 5, SEED)
    assert first == cases.corrupted(SOURCES["tiny_convnet"], 5, SEED)
    assert len({data for _, data in first}) == 5
