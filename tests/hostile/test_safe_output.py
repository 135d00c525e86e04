"""Safe output: results are written beside their target and renamed into place; a failure
mid-write leaves the previous output and the input as they were and no temporary file; the
input is replaced only with --in-place, atomically, its external data file included."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile.cases import WEIGHT, weighted_model
from typer.testing import CliRunner

from onnxforge import _cleanup, io
from onnxforge.cli import app
from onnxforge.errors import OnnxForgeError
from onnxforge.io import _atomic, load, save

runner = CliRunner()
COMMANDS = {
    "infer": ["infer", "{m}"],
    "fold": ["fold", "{m}"],
    "convert": ["convert", "{m}", "--opset", "17"],
    "optimize": ["optimize", "{m}"],
}


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(params=[True, False], ids=["unnamed-temporaries", "named-temporaries"])
def tmpfile_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run with Linux's unnamed O_TMPFILE files and with the named fallback."""
    if not request.param:
        monkeypatch.setattr(_atomic, "_O_TMPFILE", 0)
    elif not _atomic._O_TMPFILE:
        pytest.skip("no O_TMPFILE on this system")
    return bool(request.param)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_in_place_replaces_the_input_and_without_it_the_input_is_never_written(
    command: str, tmp_path: Path, tmpfile_mode: bool
) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(weighted_model(relu=True), path)
    original = path.read_bytes()
    args = [a.format(m=path) for a in COMMANDS[command]]
    refused = runner.invoke(app, [*args, "-o", str(path)])
    assert refused.exit_code == 1 and "refusing to overwrite the input" in refused.stderr
    assert "--in-place" in refused.stderr and path.read_bytes() == original
    done = runner.invoke(app, [*args, "--in-place"])
    assert done.exit_code == 0, done.output
    assert _listing(tmp_path) == ["m.onnx"]
    result = load(path)
    np.testing.assert_array_equal(result.graph.initializers[0].const.numpy(), WEIGHT)
    both = runner.invoke(app, [*args, "--in-place", "-o", str(tmp_path / "other.onnx")])
    assert both.exit_code == 2 and "not both" in both.output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_in_place_with_external_data_replaces_its_data_file_too(
    command: str, tmp_path: Path
) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(
        weighted_model(relu=True),
        path,
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=0,
    )
    args = [a.format(m=path) for a in COMMANDS[command]]
    done = runner.invoke(app, [*args, "--in-place"])
    assert done.exit_code == 0, done.output
    assert _listing(tmp_path) == ["m.onnx", "weights.bin"]
    written = onnx.load(path, load_external_data=False)
    locations = {e.value for t in written.graph.initializer for e in t.external_data}
    assert "weights.bin" in locations
    np.testing.assert_array_equal(load(path).graph.initializers[0].const.numpy(), WEIGHT)


def test_a_failure_mid_write_leaves_the_previous_output_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile_mode: bool
) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(
        weighted_model(relu=True),
        path,
        save_as_external_data=True,
        location="m.onnx.data",
        size_threshold=0,
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "out.onnx"
    assert runner.invoke(app, ["fold", str(path), "-o", str(out)]).exit_code == 0
    previous = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    assert set(previous) == {"out.onnx", "out.onnx.data"}

    def full_disk(out_file, *args: object) -> None:
        out_file.write(b"\0" * 1000)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io, "write_model", full_disk)
    result = runner.invoke(app, ["convert", str(path), "--opset", "17", "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "No space left on device" in result.stderr and str(out) in result.stderr
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == previous
    assert _listing(tmp_path) == ["m.onnx", "m.onnx.data", "out"]


def test_a_failure_mid_write_of_a_new_output_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile_mode: bool
) -> None:
    model = io.from_proto(weighted_model(relu=True))

    def broken(out_file, *args: object) -> None:
        out_file.write(b"partial")
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(io, "write_model", broken)
    with pytest.raises(OnnxForgeError, match="Input/output error"):
        save(model, tmp_path / "new.onnx", external_data=True, size_threshold=0)
    assert _listing(tmp_path) == []


def test_the_janitor_removes_what_a_killed_process_left(tmp_path: Path) -> None:
    """A process that registered a temporary folder and file dies by SIGKILL: the janitor
    child removes both."""
    script = f"""
import os, signal, sys, time
from pathlib import Path
from onnxforge import _cleanup
_cleanup.enable_janitor()
folder = Path({str(tmp_path)!r}) / ".staging"
folder.mkdir()
(folder / "model.onnx").write_bytes(b"x")
_cleanup.register(folder)
named = Path({str(tmp_path)!r}) / ".out.onnx.tmp"
named.write_bytes(b"y")
_cleanup.register(named)
kept = Path({str(tmp_path)!r}) / "kept.onnx"
kept.write_bytes(b"z")
_cleanup.register(kept)
_cleanup.unregister(kept)
print("ready", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    assert _listing(tmp_path) == [".out.onnx.tmp", ".staging", "kept.onnx"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while _listing(tmp_path) != ["kept.onnx"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _listing(tmp_path) == ["kept.onnx"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_polite_kill_removes_what_is_registered_and_ends_by_the_signal(
    sig: int, tmp_path: Path
) -> None:
    script = f"""
import time
from pathlib import Path
from onnxforge import _cleanup
_cleanup.install_handlers()
named = Path({str(tmp_path)!r}) / ".out.onnx.tmp"
named.write_bytes(b"y")
_cleanup.register(named)
print("ready", flush=True)
time.sleep(60)
"""
    # A shell's background job inherits SIGINT ignored, and install_handlers rightly leaves an
    # ignored signal alone: the child starts with the default disposition, as a terminal's has.
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),  # noqa: PLW1509
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig
    assert _listing(tmp_path) == []


def test_registrations_are_per_path_and_removal_skips_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_bytes(b"k")
    link = tmp_path / "link"
    link.symlink_to(victim, target_is_directory=True)
    _cleanup.remove(link)
    assert not link.exists() and (victim / "keep").exists()
    _cleanup.remove(tmp_path / "missing")  # nothing to do, no error


def test_durable_flushes_each_file_before_its_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile_mode: bool
) -> None:
    model = io.from_proto(weighted_model(relu=True))
    target, data = tmp_path / "m.onnx", tmp_path / "m.onnx.data"
    synced: list[tuple[bool, bool]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append((target.exists(), data.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    save(model, tmp_path / "plain.onnx", external_data=True, size_threshold=0)
    assert synced == []  # like onnx.save: the rename alone covers a killed process
    save(model, target, external_data=True, size_threshold=0, durable=True)
    assert synced == [(False, False), (False, False), (True, True)]  # data, model, folder
    np.testing.assert_array_equal(load(target).graph.initializers[0].const.numpy(), WEIGHT)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_writing_command_takes_durable(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(weighted_model(relu=True), path)
    synced: list[bool] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(out.exists())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    args = [a.format(m=path) for a in COMMANDS[command]]
    done = runner.invoke(app, [*args, "-o", str(out), "--durable"])
    assert done.exit_code == 0, done.output
    assert synced == [False, True]  # the model before its rename, the folder after
