"""A sample of the hostile models through the real command line (``python -m onnxforge``, a
process each, 2 GiB of address space, a timeout): the exit codes a shell sees, never a
traceback; the in-process suite (test_graphs, test_corrupt, test_paths) covers the rest."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hostile import cases
from hostile.harness import COMMANDS, TIME_BOUND, cli_args

from onnxforge.cli._app import MAX_LINE

ADDRESS_SPACE = 2 << 30


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _run(command: str, model: Path, out_dir: Path) -> subprocess.CompletedProcess[str]:
    out = out_dir / f"{command}.onnx"
    return subprocess.run(
        [sys.executable, "-m", "onnxforge", *cli_args(command, model, out)],
        capture_output=True,
        text=True,
        timeout=TIME_BOUND + 30,  # interpreter start and imports come on top
        preexec_fn=_limit,
        check=False,
    )


def _truncated(folder: Path) -> Path:
    name, data = cases.corrupted(cases.TINY_CONVNET, 1, 7)[0]
    path = folder / f"{name}.onnx"
    path.write_bytes(data)
    return path


def _dotdot(folder: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [64])],
        [numpy_helper.from_array(np.ones(64, np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = folder / "escape.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    proto = onnx.load(path, load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../w.bin"
    path.write_bytes(proto.SerializeToString())
    return path


SAMPLE = {
    "cycle": (cases.cycle, {1}),
    "ints_where_a_graph_belongs": (cases.ints_where_a_graph_belongs, {1}),
    "deeply_nested_subgraphs": (cases.deeply_nested_subgraphs, {2}),
    "truncated_zoo_model": (_truncated, {1, 2}),
    "external_data_outside_the_folder": (_dotdot, {2}),
}
EVERY_GRAPH_CASE = {name: case for name, case in cases.GRAPH_CASES.items() if name not in SAMPLE}


def _check(name: str, build, codes: set[int] | frozenset[int], tmp_path: Path) -> None:
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"
    model_dir.mkdir()
    out_dir.mkdir()
    model = build(model_dir)
    before = sorted(p.name for p in model_dir.iterdir())
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda c: (c, _run(c, model, out_dir)), COMMANDS))
    for command, done in results:
        where = f"onnxforge {command} {name}: exit {done.returncode}\n{done.stderr[-3000:]}"
        assert done.returncode in codes, where
        text = done.stdout + done.stderr
        assert "Traceback" not in text and "internal error" not in text, where
        assert "out of memory" not in text, where
        assert any(str(model) in line for line in text.splitlines()), where
        assert all(len(line) <= MAX_LINE + 100 for line in text.splitlines()), where
    assert list(out_dir.iterdir()) == []
    assert sorted(p.name for p in model_dir.iterdir()) == before


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_the_command_line_exits_1_or_2_with_one_line(name: str, tmp_path: Path) -> None:
    build, codes = SAMPLE[name]
    _check(name, build, codes, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVERY_GRAPH_CASE))
def test_every_graph_case_through_the_command_line(name: str, tmp_path: Path) -> None:
    """Five minutes on two cores: run with ONNXFORGE_HOSTILE_SUBPROCESS=all."""
    if os.environ.get("ONNXFORGE_HOSTILE_SUBPROCESS") != "all":
        pytest.skip("set ONNXFORGE_HOSTILE_SUBPROCESS=all for every graph case as a process")
    build, codes = EVERY_GRAPH_CASE[name]
    _check(name, build, codes, tmp_path)
