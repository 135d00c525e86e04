"""Outputs that are not regular files, and `-` for stdin and stdout, through the real command
line: character devices and FIFOs are written through and stay what they were; folders, block
devices and sockets are refused (exit 2) before any work; models stream through pipes."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile.cases import WEIGHT, weighted_model
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.testing import run_onnxruntime

runner = CliRunner()
WRITERS = {
    "optimize": ["optimize", "{m}"],
    "convert": ["convert", "{m}", "--opset", "18"],
    "fold": ["fold", "{m}"],
    "infer": ["infer", "{m}"],
}
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NEEDS_ROOT = "making a device node (os.mknod) needs root"


def _onnxforge(
    *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "onnxforge", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def _args(command: str, model: Path, out: str) -> list[str]:
    return [a.format(m=model) for a in WRITERS[command]] + ["-o", out]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(weighted_model(relu=True), path)
    return path


def _reference(command: str, model: Path) -> bytes:
    """What the command writes to a regular file (same input and options, same bytes)."""
    out = model.parent / f"{command}.reference.onnx"
    done = runner.invoke(app, _args(command, model, str(out)))
    assert done.exit_code == 0, done.output
    data = out.read_bytes()
    out.unlink()
    return data


def _node(st: os.stat_result) -> tuple[int, int]:
    return stat.S_IFMT(st.st_mode), st.st_rdev


class _Reader(threading.Thread):
    """Reads a FIFO to its end, as `cat fifo > file` would."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.data = b""

    def run(self) -> None:
        with open(self.path, "rb") as fifo:
            self.data = fifo.read()


@pytest.mark.skipif(not ROOT, reason=NEEDS_ROOT)
@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_character_device_as_out_is_written_through_and_stays_a_device(
    command: str, model: Path, tmp_path: Path
) -> None:
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    before = _node(os.stat(null))
    done = _onnxforge(*_args(command, model, str(null)))
    assert done.returncode == 0, done.stderr.decode()
    assert _node(os.stat(null)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "null"]


def test_dev_null_as_out_stays_dev_null(model: Path) -> None:
    before = _node(os.stat("/dev/null"))
    done = _onnxforge("optimize", str(model), "-o", "/dev/null")
    assert done.returncode == 0, done.stderr.decode()
    assert _node(os.stat("/dev/null")) == before and stat.S_ISCHR(before[0])


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_fifo_as_out_gets_the_model_bytes_in_order_and_stays_a_fifo(
    command: str, model: Path, tmp_path: Path
) -> None:
    want = _reference(command, model)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = _Reader(fifo)
    reader.start()
    done = _onnxforge(*_args(command, model, str(fifo)))
    reader.join(timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert reader.data == want
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "pipe"]


def test_a_failed_command_leaves_a_fifo_reader_an_empty_stream_not_a_wait(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07\x12\xff\xff")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = _Reader(fifo)
    reader.start()
    done = _onnxforge("optimize", str(broken), "-o", str(fifo))
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert done.returncode == 2 and b"broken.onnx" in done.stderr
    assert reader.data == b""


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        yield path


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("kind", ["folder", "socket", "block device"])
def test_a_folder_a_socket_or_a_block_device_as_out_is_refused_before_any_work(
    command: str, kind: str, model: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "folder":
        out = tmp_path / "folder"
        out.mkdir()
    elif kind == "socket":
        out = request.getfixturevalue("unix_socket")
    else:
        if not ROOT:
            pytest.skip(NEEDS_ROOT)
        out = tmp_path / "block"
        os.mknod(out, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # never opened
    before = _node(os.stat(out))
    missing = tmp_path / "missing.onnx"  # not even read: OUT is refused first
    for source in (model, missing):
        done = _onnxforge(*_args(command, source, str(out)))
        lines = done.stderr.decode().splitlines()
        assert done.returncode == 2, done.stderr.decode()
        assert len(lines) == 1 and f"{out}: is a {kind}" in lines[0], lines
    assert _node(os.stat(out)) == before
    if kind == "folder":
        assert list(out.iterdir()) == []


def _outputs(path: Path, x: np.ndarray) -> list[np.ndarray]:
    return run_onnxruntime(str(path), {"x": x})


def test_a_model_streams_from_stdin_to_stdout_and_computes_the_same(
    model: Path, tmp_path: Path
) -> None:
    """`cat m.onnx | onnxforge optimize - -o - > out.onnx`: stdout carries the model bytes
    alone (the ones -o FILE writes), the tables stay on stderr."""
    pytest.importorskip("onnxruntime")
    done = _onnxforge("optimize", "-", "-o", "-", stdin=model.read_bytes())
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == _reference("optimize", model)
    assert b"<stdin> -> <stdout>" in done.stderr and b"fold-constants" in done.stderr
    out = tmp_path / "streamed.onnx"
    out.write_bytes(done.stdout)
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    (got,) = _outputs(out, x)
    np.testing.assert_allclose(got, np.maximum(x + WEIGHT, 0), rtol=1e-6)
    for want, have in zip(_outputs(model, x), _outputs(out, x), strict=True):
        np.testing.assert_array_equal(have, want)


def test_convert_piped_into_optimize_works(model: Path, tmp_path: Path) -> None:
    """`onnxforge convert - --opset 18 -o - | onnxforge optimize - -o out.onnx`"""
    pytest.importorskip("onnxruntime")
    out = tmp_path / "out.onnx"
    command = [sys.executable, "-m", "onnxforge"]
    with model.open("rb") as source:
        first = subprocess.Popen(
            [*command, "convert", "-", "--opset", "18", "-o", "-"],
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert first.stdout is not None
        second = subprocess.run(
            [*command, "optimize", "-", "-o", str(out)],
            stdin=first.stdout,
            capture_output=True,
            timeout=60,
            check=False,
        )
        first.stdout.close()
        _, first_err = first.communicate(timeout=60)
    assert first.returncode == 0, first_err.decode()
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout == b""
    written = onnx.load(out)
    assert {o.domain: o.version for o in written.opset_import}[""] == 18
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    for want, have in zip(_outputs(model, x), _outputs(out, x), strict=True):
        np.testing.assert_array_equal(have, want)


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_every_writer_reads_stdin_and_writes_stdout(command: str, model: Path) -> None:
    args = [a.replace("{m}", "-") for a in WRITERS[command]] + ["-o", "-"]
    done = runner.invoke(app, args, input=model.read_bytes())
    assert done.exit_code == 0, done.output
    assert done.stdout_bytes == _reference(command, model)
    assert "<stdin>" in done.stderr


def test_info_and_check_read_stdin(model: Path) -> None:
    info = runner.invoke(app, ["info", "-", "--json"], input=model.read_bytes())
    assert info.exit_code == 0, info.output
    assert '"file": "<stdin>"' in info.stdout
    check = runner.invoke(app, ["check", "-", str(model)], input=b"not a model")
    assert check.exit_code == 2
    assert "error: <stdin>: not an ONNX model" in check.stderr
    assert "onnxforge-stdin" not in check.output  # the temporary copy is never named
    twice = runner.invoke(app, ["check", "-", "-"], input=model.read_bytes())
    assert twice.exit_code == 2 and "can be read once" in twice.output


def test_an_empty_or_unreadable_stdin_exits_2(model: Path) -> None:
    empty = runner.invoke(app, ["optimize", "-", "-o", "-"], input=b"")
    assert empty.exit_code == 2 and "error: <stdin>: is empty" in empty.stderr
    assert empty.stdout_bytes == b""


def test_external_data_cannot_go_to_a_stream_unless_embedded(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(
        weighted_model(), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    for command in sorted(WRITERS):
        args = _args(command, path, "-")
        refused = runner.invoke(app, args)
        assert refused.exit_code == 2, refused.output
        assert "--no-external-data" in refused.stderr and "-o FILE" in refused.stderr
        assert refused.stdout_bytes == b""
        asked = runner.invoke(app, [*args, "--external-data"])
        assert asked.exit_code == 2 and "drop --external-data" in asked.stderr
        embedded = runner.invoke(app, [*args, "--no-external-data"])
        assert embedded.exit_code == 0, embedded.output
        written = onnx.load_from_string(embedded.stdout_bytes)
        assert not any(t.external_data for t in written.graph.initializer)
    stdin = runner.invoke(app, ["optimize", "-", "-o", "-"], input=path.read_bytes())
    assert stdin.exit_code == 2 and "read from a stream cannot reach" in stdin.stderr


def test_in_place_needs_a_regular_file(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    refused = runner.invoke(app, ["optimize", str(fifo), "--in-place"])
    assert refused.exit_code == 2 and "regular file" in refused.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    stdin = runner.invoke(app, ["fold", "-", "--in-place"], input=model.read_bytes())
    assert stdin.exit_code == 2 and "MODEL is stdin" in stdin.stderr


def test_the_json_report_and_the_model_cannot_both_take_stdout(model: Path) -> None:
    for json_args in (["--json"], ["--json", "-"]):
        done = runner.invoke(app, ["fold", str(model), "-o", "-", *json_args])
        assert done.exit_code == 2 and "stdout carries the model" in done.stderr
        assert done.stdout_bytes == b""


def test_json_on_stdout_or_in_a_file_works_alike_on_every_command(
    model: Path, tmp_path: Path
) -> None:
    """--json alone or --json - prints the report on stdout in place of the tables; --json
    FILE writes it there and the tables stay; --json before MODEL still means stdout."""
    out = str(tmp_path / "out.onnx")
    for args in (
        ["optimize", str(model), "-o", out],
        ["fold", str(model), "-o", out],
        ["convert", str(model), "--opset", "18", "-o", out],
        ["infer", str(model)],
        ["info", str(model)],
        ["check", str(model)],
        ["passes"],
    ):
        name = args[0]
        bare = runner.invoke(app, [*args, "--json"])
        dash = runner.invoke(app, [*args, "--json", "-"])
        assert bare.exit_code == dash.exit_code == 0, bare.output + dash.output
        assert json.loads(bare.stdout).keys() == json.loads(dash.stdout).keys(), name
        assert "━" not in bare.stderr, name  # no tables
        report = tmp_path / f"{name}.json"
        to_file = runner.invoke(app, [*args, "--json", str(report)])
        assert to_file.exit_code == 0, to_file.output
        assert json.loads(report.read_text()).keys() == json.loads(bare.stdout).keys(), name
        if name not in ("info", "passes", "check", "infer"):
            assert "━" in to_file.stderr, name  # the tables stay
    first = runner.invoke(app, ["info", "--json", str(model)])
    assert first.exit_code == 0 and json.loads(first.stdout)["file"] == str(model)
    named = runner.invoke(app, ["fold", str(model), "-o", out, "--json=x.onnx"])
    assert named.exit_code == 2 and "names a model" in named.stderr
