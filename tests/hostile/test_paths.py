"""External data that would read or write outside the model's folder, through every command
(load) and every writer (save): refused before a byte is read or written, one line naming
the file, the tensor and the location; outputs never written through a link."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile.cases import WEIGHT, weighted_model
from hostile.harness import COMMANDS, assert_clean, run_all, run_command
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.errors import OnnxForgeError
from onnxforge.io import load, save

runner = CliRunner()


def _external(folder: Path, name: str = "m.onnx", location: str = "m.onnx.data") -> Path:
    """A model whose weight lies in ``location`` beside it."""
    path = folder / name
    onnx.save_model(
        weighted_model(), path, save_as_external_data=True, location=location, size_threshold=0
    )
    return path


def _retarget(path: Path, **entries: str) -> None:
    """Rewrite the weight's external_data entries (location, offset, length)."""
    proto = onnx.load(path, load_external_data=False)
    tensor = proto.graph.initializer[0]
    kept = {e.key: e.value for e in tensor.external_data} | entries
    del tensor.external_data[:]
    for key, value in kept.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    path.write_bytes(proto.SerializeToString())


def _absolute(model: Path, outside: Path) -> str:
    return str(outside)


def _dotdot(model: Path, outside: Path) -> str:
    return "../outside.bin"


def _nested_dotdot(model: Path, outside: Path) -> str:
    (model.parent / "sub").mkdir()
    return "sub/../../outside.bin"


def _symlink_file(model: Path, outside: Path) -> str:
    (model.parent / "link.bin").symlink_to(outside)
    return "link.bin"


def _symlink_folder(model: Path, outside: Path) -> str:
    (model.parent / "linked").symlink_to(outside.parent)
    return "linked/outside.bin"


def _symlink_to_inside(model: Path, outside: Path) -> str:
    """Even a link to the model's own data file: links are refused, not followed."""
    (model.parent / "alias.bin").symlink_to(model.parent / "m.onnx.data")
    return "alias.bin"


def _hard_link(model: Path, outside: Path) -> str:
    os.link(outside, model.parent / "hard.bin")
    return "hard.bin"


def _fifo(model: Path, outside: Path) -> str:
    os.mkfifo(model.parent / "pipe.bin")
    return "pipe.bin"


def _folder(model: Path, outside: Path) -> str:
    (model.parent / "adir").mkdir()
    return "adir"


def _missing(model: Path, outside: Path) -> str:
    return "missing.bin"


def _empty(model: Path, outside: Path) -> str:
    return ""


def _nul(model: Path, outside: Path) -> str:
    return "m.onnx.data\0.txt"


def _device(model: Path, outside: Path) -> str:
    (model.parent / "zero").symlink_to("/dev/zero")
    return "zero"


LOCATIONS: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "absolute": (_absolute, "is absolute"),
    "dotdot": (_dotdot, "points outside the model's folder"),
    "nested_dotdot": (_nested_dotdot, "points outside the model's folder"),
    "symlink_file": (_symlink_file, "passes through a symbolic link"),
    "symlink_folder": (_symlink_folder, "passes through a symbolic link"),
    "symlink_to_inside": (_symlink_to_inside, "passes through a symbolic link"),
    "hard_link": (_hard_link, "single hard link"),
    "fifo": (_fifo, "not a regular file"),
    "folder": (_folder, "not a regular file"),
    "missing": (_missing, "does not exist"),
    "empty": (_empty, "is empty"),
    "nul": (_nul, "NUL"),
    "device": (_device, "passes through a symbolic link"),
}


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"
    model_dir.mkdir()
    out_dir.mkdir()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(WEIGHT.tobytes())
    return model_dir, out_dir, outside


@pytest.mark.parametrize("trick", sorted(LOCATIONS))
def test_an_unsafe_location_is_refused_by_every_command(trick: str, dirs) -> None:
    model_dir, out_dir, outside = dirs
    path = _external(model_dir)
    make, reason = LOCATIONS[trick]
    location = make(path, outside)
    _retarget(path, location=location)
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, {2}, out_dir)
        text = outcome.stdout + outcome.stderr
        assert reason in text and "tensor 'w'" in text, outcome
    assert outside.read_bytes() == WEIGHT.tobytes()


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ({"offset": "8192"}, "lies outside"),
        ({"offset": "-4"}, "lies outside"),
        ({"length": str(1 << 40)}, "lies outside"),
        ({"offset": "4096", "length": "16384"}, "lies outside"),
        ({"length": "64"}, "need 16384"),
        ({"offset": "zero"}, "not a number"),
        ({"length": "1e9"}, "not a number"),
    ],
)
def test_an_offset_or_length_past_the_file_is_refused_by_every_command(
    entries: dict[str, str], reason: str, dirs
) -> None:
    model_dir, out_dir, _ = dirs
    path = _external(model_dir)
    _retarget(path, **entries)
    for outcome in run_all(path, out_dir):
        assert_clean(outcome, {2}, out_dir)
        assert reason in outcome.stdout + outcome.stderr, outcome


def test_refusals_read_nothing(dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks work on names and descriptors (fstat): a refused file never becomes a file
    tensors read from; only the model file does."""
    from onnxforge.io import _files

    model_dir, _, outside = dirs
    path = _external(model_dir)
    _retarget(path, location="hard.bin")
    os.link(outside, model_dir / "hard.bin")
    opened: list[Path] = []
    real = _files.DataFile.__init__

    def spy(self: _files.DataFile, file: Path, fd: int, size: int) -> None:
        opened.append(file)
        real(self, file, fd, size)

    monkeypatch.setattr(_files.DataFile, "__init__", spy)
    with pytest.raises(OnnxForgeError, match="single hard link"):
        load(path)
    assert opened == [path]


# -- writing ------------------------------------------------------------------------------------
WRITERS = {
    "infer": ["infer", "{m}", "-o", "{o}"],
    "fold": ["fold", "{m}", "-o", "{o}"],
    "convert": ["convert", "{m}", "--opset", "17", "-o", "{o}"],
    "optimize": ["optimize", "{m}", "-o", "{o}"],
    "optimize_checked": ["optimize", "{m}", "-o", "{o}", "--check", "1"],
}


def _invoke(args: list[str], model: Path, out: Path):
    return runner.invoke(app, [a.format(m=model, o=out) for a in args])


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_outputs_are_never_written_through_a_link(writer: str, link: str, dirs) -> None:
    """OUT and OUT.data that are links to a victim file are replaced, the victim untouched."""
    model_dir, out_dir, outside = dirs
    path = _external(model_dir)
    out = out_dir / "out.onnx"
    victims = [out_dir.parent / "victim_model", out_dir.parent / "victim_data"]
    for victim, name in zip(victims, ("out.onnx", "out.onnx.data"), strict=True):
        victim.write_bytes(b"precious")
        if link == "symlink":
            (out_dir / name).symlink_to(victim)
        else:
            os.link(victim, out_dir / name)
    result = _invoke(WRITERS[writer], path, out)
    assert result.exit_code == 0, result.output
    for victim in victims:
        assert victim.read_bytes() == b"precious"
    for name in ("out.onnx", "out.onnx.data"):
        assert not (out_dir / name).is_symlink() and (out_dir / name).stat().st_nlink == 1
    np.testing.assert_array_equal(load(out).graph.initializers[0].const.numpy(), WEIGHT)
    assert sorted(p.name for p in out_dir.iterdir()) == ["out.onnx", "out.onnx.data"]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_output_over_the_inputs_data_file_is_refused(writer: str, dirs) -> None:
    """The input reads out.onnx.data; writing out.onnx beside it would replace that file."""
    model_dir, _, _ = dirs
    path = _external(model_dir, location="out.onnx.data")
    data = (model_dir / "out.onnx.data").read_bytes()
    result = _invoke(WRITERS[writer], path, model_dir / "out.onnx")
    assert result.exit_code == 1
    assert "the input reads this file" in result.stderr and str(path) in result.stderr
    assert (model_dir / "out.onnx.data").read_bytes() == data
    assert sorted(p.name for p in model_dir.iterdir()) == ["m.onnx", "out.onnx.data"]
    result = _invoke(WRITERS[writer], path, model_dir / "out.onnx.data")
    assert result.exit_code == 1 and "the input reads this file" in result.stderr


@pytest.mark.parametrize(
    "location", ["../w.bin", "sub/w.bin", "/tmp/w.bin", ".", "..", "w\0.bin", "m.onnx"]
)
def test_a_location_for_saving_must_be_a_plain_file_name(location: str, dirs) -> None:
    model_dir, out_dir, _ = dirs
    model = load(_external(model_dir))
    with pytest.raises(OnnxForgeError, match="external data location"):
        save(model, out_dir / "m.onnx", external_data=True, location=location)
    assert list(out_dir.iterdir()) == []
    assert not (out_dir.parent / "w.bin").exists()


def test_a_folder_in_place_of_the_output_is_refused_before_any_work(dirs) -> None:
    """A folder at OUT (or at OUT.data) is an output that cannot be: exit 2, like a usage
    error, before the model is worked on."""
    model_dir, out_dir, _ = dirs
    path = _external(model_dir)
    (out_dir / "out.onnx").mkdir()
    for command in ("infer", "fold", "convert", "optimize"):
        outcome = run_command(command, path, out_dir / "out.onnx")
        assert outcome.exit_code == 2 and "is a folder" in outcome.stderr, outcome
    (out_dir / "out.onnx").rmdir()
    (out_dir / "out.onnx.data").mkdir()
    outcome = run_command("fold", path, out_dir / "out.onnx")
    assert outcome.exit_code == 2 and "is a folder" in outcome.stderr, outcome
    assert [p.name for p in out_dir.iterdir()] == ["out.onnx.data"]


def test_every_command_is_covered() -> None:
    assert set(COMMANDS) == {"info", "infer", "fold", "convert", "optimize", "check"}
