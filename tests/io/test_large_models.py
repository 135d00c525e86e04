"""Models beyond protobuf's 2 GiB: a 3 GB initializer, and the exported models (2.5 GB GPT-2)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytestmark = pytest.mark.slow

GIB = 1 << 30


def _write_3gb_model(folder: Path) -> Path:
    """Y = Add(X, W), W float32[768, 1024, 1024] (3 GiB) in external data, written in chunks."""
    rows = 768
    chunk = np.arange(1024 * 1024, dtype=np.float32).reshape(1, 1024, 1024)
    with open(folder / "w.bin", "wb") as f:
        for i in range(rows):
            f.write((chunk + i).tobytes())
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[rows, 1024, 1024])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(3 * GIB))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "big",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1024, 1024])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [rows, 1024, 1024])],
        [weight],
    )
    path = folder / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    return h.hexdigest()


_CHILD = """
import resource, sys
from pathlib import Path
# ru_maxrss counts the memory of the parent at fork (pytest's, often over 1 GB): measure the
# peak from here on (VmHWM reset through clear_refs), ru_maxrss where /proc has neither.
try:
    Path("/proc/self/clear_refs").write_text("5")
    reset = True
except OSError:
    reset = False
from onnxforge.io import load, save
model = load(sys.argv[1])
w = model.graph.initializers[0].const.numpy()
assert w.shape == (768, 1024, 1024) and float(w[5, 0, 3]) == 8.0 and not w.flags.owndata
save(model, sys.argv[2])
status = Path("/proc/self/status").read_text() if reset else ""
hwm = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")]
print(hwm[0] * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def test_a_3gb_initializer_round_trips_in_little_memory(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    if free < 10 * GIB:
        pytest.skip(f"needs 10 GiB free in {tmp_path}, has {free / GIB:.1f}")
    source = _write_3gb_model(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source), str(out_dir / "big.onnx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    peak = int(result.stdout.strip().splitlines()[-1])
    assert peak < 512 << 20, f"peak RSS {peak / 2**20:.0f} MiB for a 3 GiB weight"
    written = onnx.load(out_dir / "big.onnx", load_external_data=False)
    info = {e.key: e.value for e in written.graph.initializer[0].external_data}
    assert info["location"] == "big.onnx.data" and int(info["length"]) == 3 * GIB
    data = out_dir / "big.onnx.data"
    assert data.stat().st_size == int(info["offset"]) + 3 * GIB
    assert _digest(data) == _digest(tmp_path / "w.bin")


EXPORT_DIR = os.environ.get("ONNXFORGE_EXPORT_DIR")


def _exported() -> list[Path]:
    if not EXPORT_DIR or not Path(EXPORT_DIR).is_dir():
        return []
    return sorted(Path(EXPORT_DIR).glob("*.onnx")) + sorted(Path(EXPORT_DIR).glob("*/*.onnx"))


@pytest.mark.skipif(
    not _exported(),
    reason="set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)",
)
@pytest.mark.parametrize("source", _exported(), ids=[p.stem for p in _exported()])
def test_exported_model_round_trips(source: Path, tmp_path: Path) -> None:
    from onnxforge.io import load, save

    out = tmp_path / source.name
    save(load(source), out)
    original = onnx.load(source, load_external_data=False)
    resaved = onnx.load(out, load_external_data=False)
    for proto in (original, resaved):
        for tensor in proto.graph.initializer:
            tensor.ClearField("external_data")
    assert resaved == original
    before, after = load(source), load(out)
    for a, b in zip(before.graph.initializers, after.graph.initializers, strict=True):
        assert a.name == b.name and np.array_equal(
            a.const.numpy(), b.const.numpy(), equal_nan=True
        )
    if sum(v.const.nbytes for v in before.graph.initializers) > GIB:
        return  # too large to run twice here; every weight byte was compared above
    ort = pytest.importorskip("onnxruntime")
    feeds = {}
    rng = np.random.default_rng(0)
    session = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        if "int" in i.type:
            feeds[i.name] = rng.integers(0, 2, shape).astype(np.int64)  # valid ids, masks, types
        elif "bool" in i.type:
            feeds[i.name] = np.ones(shape, dtype=bool)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    expected = session.run(None, feeds)
    actual = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)
