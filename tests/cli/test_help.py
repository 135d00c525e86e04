"""Help text: command descriptions one line per paragraph (the terminal wraps them, not the
docstring's line breaks), every option says its default, examples in every command's epilog,
and square brackets escaped so rich markup never eats them."""

from __future__ import annotations

import pytest
import typer
from rich.text import Text
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.cli._app import bare_json

runner = CliRunner()
GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]


def _command(name: str):  # type: ignore[no-untyped-def]
    return GROUP.commands[name]  # type: ignore[attr-defined]


def _plain(markup: str) -> str:
    """What rich shows for ``markup``: equal to the text with its escapes removed, unless a
    [bracket] was taken for a style."""
    return Text.from_markup(markup).plain


def test_every_command_is_there() -> None:
    assert COMMANDS == ["check", "convert", "fold", "infer", "info", "optimize", "passes"]


@pytest.mark.parametrize("name", COMMANDS)
def test_descriptions_are_paragraphs_of_one_line(name: str) -> None:
    command = _command(name)
    assert command.short_help and "\n" not in command.short_help
    for paragraph in command.help.split("\n\n"):
        assert paragraph and "\n" not in paragraph
    assert command.help.startswith(command.short_help)


def test_the_command_list_shows_each_description_unbroken() -> None:
    result = runner.invoke(app, ["--help"], terminal_width=250)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in COMMANDS:
        assert " ".join(_command(name).short_help.split()[:8]) in text


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_says_its_default(name: str) -> None:
    for param in _command(name).params:
        if param.name == "help" or not isinstance(param, typer.core.TyperOption):
            continue
        text = param.help or ""
        assert "Default:" in text or "Required" in text, f"{name} {param.opts}: {text!r}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_examples(name: str) -> None:
    command = _command(name)
    assert command.epilog.startswith("Examples:")
    examples = command.epilog.split("\n\n")[1:]
    assert examples and all(e.startswith("onnxforge ") or "| onnxforge" in e for e in examples)
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output


@pytest.mark.parametrize("name", COMMANDS)
def test_square_brackets_in_help_are_escaped(name: str) -> None:
    command = _command(name)
    texts = [command.help, command.epilog] + [p.help or "" for p in command.params]
    for text in texts:
        assert _plain(text) == text.replace("\\[", "["), text


def test_check_help_shows_its_bracketed_names() -> None:
    result = runner.invoke(app, ["check", "--help"], terminal_width=250)
    assert "[tool.onnxforge.check]" in result.output
    assert "onnxforge[openvino]" in result.output


def test_a_bare_json_means_stdout() -> None:
    assert bare_json(["m.onnx", "--json"]) == ["m.onnx", "--json=-"]
    assert bare_json(["--json", "m.onnx"]) == ["--json=-", "m.onnx"]
    assert bare_json(["--json", "-q"]) == ["--json=-", "-q"]
    assert bare_json(["--json", "-"]) == ["--json", "-"]
    assert bare_json(["--json", "r.json"]) == ["--json", "r.json"]
    assert bare_json(["--", "--json"]) == ["--", "--json"]
