"""The progress display: on a terminal (a pseudo-terminal here) long work shows it on stderr;
without a terminal, with --quiet or with --json on stdout there is none."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from hostile.cases import weighted_model

HIDE_CURSOR = "\x1b[?25l"
"""What rich's live display writes first on a terminal (and nothing else here does)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    return env


def _on_terminal(args: list[str], timeout: float = 60) -> tuple[int, str]:
    """Run onnxforge with stdin, stdout and stderr on a pseudo-terminal; what it showed."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "onnxforge", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=_env(),
        close_fds=True,
    )
    os.close(follower)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            elif child.poll() is not None:
                break
        code = child.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
        with contextlib.suppress(OSError):
            os.close(leader)
    return code, shown.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("progress")
    paths = []
    for i in range(3):
        path = folder / f"m{i}.onnx"
        onnx.save(weighted_model(relu=True), path)
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["optimize", "{m0}", "-o", "{out}", "--check", "1"], "checking on onnxruntime"),
        (["check", "{m0}", "{m1}", "{m2}", "--jobs", "2"], "checking"),
    ],
    ids=["optimize-check", "check-many-files"],
)
def test_a_terminal_sees_the_progress_display_and_a_pipe_does_not(
    args: list[str], what: str, models: list[Path], tmp_path: Path
) -> None:
    pytest.importorskip("onnxruntime")
    names = {f"m{i}": str(p) for i, p in enumerate(models)} | {"out": str(tmp_path / "o.onnx")}
    command = [a.format(**names) for a in args]
    code, shown = _on_terminal(command)
    assert code == 0, shown
    assert HIDE_CURSOR in shown and what in shown, shown
    piped = subprocess.run(
        [sys.executable, "-m", "onnxforge", *command],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr
    assert what not in piped.stderr


def test_quiet_on_a_terminal_shows_nothing_but_errors(models: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "o.onnx"
    code, shown = _on_terminal(["optimize", str(models[0]), "-o", str(out), "--check", "1", "-q"])
    assert code == 0 and shown == "" and out.exists(), shown
    code, shown = _on_terminal(["optimize", str(tmp_path / "missing.onnx"), "-o", str(out), "-q"])
    assert code == 2 and "missing.onnx: no such file" in shown


def test_json_on_stdout_gets_no_progress_display(models: list[Path]) -> None:
    code, shown = _on_terminal(["check", *map(str, models), "--jobs", "2", "--json"])
    assert code == 0, shown
    assert HIDE_CURSOR not in shown
    assert '"exit_code": 0' in re.sub(r"\x1b\[[0-9;]*m", "", shown)  # colors aside


def test_a_terminal_is_never_given_model_bytes_nor_waited_on_for_one(
    models: list[Path], tmp_path: Path
) -> None:
    code, shown = _on_terminal(["optimize", str(models[0]), "-o", "-"])
    assert code == 2 and "<stdout>: is a terminal" in shown, shown
    code, shown = _on_terminal(["optimize", "-", "-o", str(tmp_path / "o.onnx")], timeout=30)
    assert code == 2 and "<stdin>: is a terminal" in shown, shown
    assert not (tmp_path / "o.onnx").exists()
