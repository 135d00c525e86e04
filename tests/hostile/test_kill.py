"""`onnxforge optimize` killed (SIGKILL, SIGTERM) while it writes a 300 MB result: the previous
output is intact, the input untouched, and no temporary file or folder is left behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

N = 5000  # three float32[5000, 5000] weights: 300 MB
NEEDED = 2 << 30  # input, previous output and the result being written, with room to spare


def _digest(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (hidden ones included) and a hash of its bytes."""
    found = {}
    for path in sorted(folder.iterdir()):
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)
        found[path.name] = h.hexdigest()
    return found


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kill")
    if shutil.disk_usage(folder).free < NEEDED:
        pytest.skip(f"needs {NEEDED >> 30} GiB free in {folder}")
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((N, N), dtype=np.float32), f"w{i}")
        for i in range(3)
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"]),
        helper.make_node("MatMul", ["h0", "w1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "input" / "big.onnx"
    path.parent.mkdir()
    onnx.save(model, path)
    return path


def _optimize(model: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "onnxforge", "optimize", str(model), "-o", str(out), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _writing(pid: int, folder: Path) -> list[Path]:
    """Descriptors of ``pid`` open on files in ``folder`` (an unnamed O_TMPFILE file shows as
    ``folder/#inode (deleted)``)."""
    found = []
    with_prefix = str(folder) + os.sep
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(with_prefix):
                found.append(Path(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        pass
    return found


def _kill_while_writing(
    proc: subprocess.Popen[bytes], folder: Path, sig: int, fraction: float
) -> bool:
    """Send ``sig`` once a file being written in ``folder`` holds ``fraction`` of the 300 MB
    (0: as soon as one is open). False when the process ended before that."""
    goal = fraction * 3 * N * N * 4
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        for fd in _writing(proc.pid, folder):
            try:
                size = os.stat(fd).st_size
            except OSError:
                continue
            if size >= goal:
                proc.send_signal(sig)
                proc.wait(timeout=60)
                return True
        time.sleep(0.0005)
    proc.wait(timeout=60)
    return False


def _settled(folder: Path, expected: dict[str, str]) -> dict[str, str]:
    """The folder once the janitor (SIGKILL) or handler (SIGTERM) is done with it."""
    deadline = time.monotonic() + 10
    while True:
        names = sorted(p.name for p in folder.iterdir())
        if names == sorted(expected) or time.monotonic() > deadline:
            return _digest(folder)
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("options", "sig", "fraction"),
    [
        ((), signal.SIGKILL, 0.5),
        ((), signal.SIGKILL, 0.95),
        (("--external-data",), signal.SIGKILL, 0.5),
        (("--external-data",), signal.SIGTERM, 0.5),
        (("--check", "1"), signal.SIGKILL, 0.5),
        (("--check", "1"), signal.SIGTERM, 0.5),
    ],
    ids=[
        "sigkill-half-way",
        "sigkill-near-the-end",
        "sigkill-external-data",
        "sigterm-external-data",
        "sigkill-while-staged-for-check",
        "sigterm-while-staged-for-check",
    ],
)
def test_a_killed_optimize_leaves_the_previous_output_and_nothing_else(
    big_model: Path, tmp_path: Path, options: tuple[str, ...], sig: int, fraction: float
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "big.opt.onnx"
    first = subprocess.run(
        [sys.executable, "-m", "onnxforge", "optimize", str(big_model), "-o", str(out)],
        capture_output=True,
        check=False,
    )
    assert first.returncode == 0, first.stderr.decode()
    previous = _digest(out_dir)
    source = _digest(big_model.parent)
    # Written differently from the first run (external data, another opset), so a result
    # that slipped through would show.
    proc = _optimize(big_model, out, "--opset", "18", *options)
    killed = _kill_while_writing(proc, out_dir, sig, fraction)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert killed, f"optimize ended before it was killed (exit {proc.returncode}): {stderr}"
    assert proc.returncode == -sig, stderr
    assert "Traceback" not in stderr
    assert _settled(out_dir, previous) == previous
    assert _digest(big_model.parent) == source


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_killed_calibration_leaves_no_temporary_folder(tmp_path: Path, sig: int) -> None:
    """The mixed precision's folder holds the float32 model's arrays (gigabytes for a large
    detector): a convert --dtype killed while it calibrates leaves nothing in the temporary
    folder (tempfile.TemporaryDirectory left it on either signal)."""
    rng = np.random.default_rng(0)
    nodes, previous = [], "x"
    weights = []
    for i in range(6):
        weights.append(
            numpy_helper.from_array(rng.standard_normal((256, 256), np.float32), f"w{i}")
        )
        nodes += [
            helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]),
            helper.make_node("Tanh", [f"m{i}"], [f"h{i}"]),
        ]
        previous = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "calibrated",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["n", 256])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "onnxforge", "convert", str(source), "--dtype", "float16",
         "-o", str(tmp_path / "out.onnx")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(temp)},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith("onnxforge-mixed-") and any(p.iterdir()) for p in temp.iterdir()):
            proc.send_signal(sig)
            break
        time.sleep(0.0005)
    proc.wait(timeout=60)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == -sig, f"it ended before it was killed: {stderr}"
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 10
    while any(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(p.name for p in temp.iterdir()) == []
    assert not (tmp_path / "out.onnx").exists()
