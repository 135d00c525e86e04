"""SARIF 2.1.0, the format GitHub code scanning reads: one run of the tool `onnxforge check`,
one rule per problem code, one result per problem (and per file that could not be checked)."""

from __future__ import annotations

__all__ = ["SCHEMA", "sarif"]

from pathlib import Path
from typing import Any

from onnxforge import __version__
from onnxforge.api._check import CODES
from onnxforge.api._check_pool import FileResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_UNREADABLE = {
    "unreadable": "the file cannot be read as an ONNX model",
    "failed": "the check failed",
}


def _uri(file: str) -> str:
    """A relative path as given (GitHub resolves it against the repository), else a file URI."""
    path = Path(file)
    return path.as_posix() if not path.is_absolute() else path.as_uri()


def sarif(results: list[FileResult]) -> dict[str, Any]:
    """The SARIF log of a check run."""
    codes = {**CODES, **_UNREADABLE}
    rules = [
        {"id": code, "name": code, "shortDescription": {"text": text}}
        for code, text in sorted(codes.items())
    ]
    index = {code: i for i, (code, _) in enumerate(sorted(codes.items()))}
    found: list[dict[str, Any]] = []
    for result in results:
        location = {"physicalLocation": {"artifactLocation": {"uri": _uri(result.file)}}}
        if result.error is not None:
            code = result.status
            found.append(
                {
                    "ruleId": code,
                    "ruleIndex": index[code],
                    "level": "error",
                    "message": {"text": result.error},
                    "locations": [location],
                }
            )
        for problem in result.problems:
            entry: dict[str, Any] = {
                "ruleId": problem.code,
                "ruleIndex": index[problem.code],
                "level": problem.severity,
                "message": {"text": problem.message},
                "locations": [dict(location)],
            }
            if problem.node:
                entry["locations"][0] = {
                    **location,
                    "logicalLocations": [{"name": problem.node, "kind": "function"}],
                }
            found.append(entry)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "onnxforge",
                        "version": __version__,
                        "informationUri": "https://pypi.org/project/onnxforge/",
                        "rules": rules,
                    }
                },
                "results": found,
            }
        ],
    }
