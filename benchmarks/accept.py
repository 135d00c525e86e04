"""Does every command accept what onnxruntime runs, and keep what it computes?

    python benchmarks/accept.py [CORPUS_DIR ...] [--zoo] [--out benchmarks/results/accept.md]

For every model onnxruntime runs (``onnxforge.testing.observe`` finds input sizes it runs
with): infer, fold, convert --opset 13/18/21 and optimize, each through the command line in a
child process; the exit code, and the largest difference of the result's outputs from the
original's on onnxruntime (same inputs; rtol 1e-4, atol 1e-5 is "same"). Then the gate,
``check --runtime onnxruntime --verify onnxruntime``: "ok" when it exits 0, with the warnings
it reports counted by code.
"""

from __future__ import annotations

__all__ = ["main"]

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from onnxforge.testing import observe

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "exporters"
COMMANDS = {
    "infer": ["infer"],
    "fold": ["fold"],
    "convert 13": ["convert", "--opset", "13"],
    "convert 18": ["convert", "--opset", "18"],
    "convert 21": ["convert", "--opset", "21"],
    "optimize": ["optimize"],
}


def _outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _differs(a: object, b: object) -> str:
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return "" if a == b else "differs"
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    if a.dtype.kind in "fc":
        close = np.allclose(b, a, rtol=1e-4, atol=1e-5, equal_nan=True)
        return "" if close else f"max diff {float(np.max(np.abs(b - a))):.3g}"
    return "" if np.array_equal(a, b) else "values differ"


def check(path: Path) -> dict[str, str]:
    """Each command's verdict on one model: "ok", or the exit code and message, or how the
    outputs differ."""
    observed = observe(onnx.load(path))
    if isinstance(observed, str):
        return {name: f"not run: {observed[:80]}" for name in COMMANDS}
    feeds = observed.feeds[0]
    want = _outputs(path, feeds)
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in COMMANDS.items():
            out = Path(tmp) / "out.onnx"
            done = subprocess.run(
                [sys.executable, "-m", "onnxforge", *args, str(path), "-o", str(out)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                line = (done.stderr.strip().splitlines() or ["?"])[0]
                verdicts[name] = f"exit {done.returncode}: {line[:160]}"
                continue
            got = _outputs(out, feeds)
            problems = [p for p in (_differs(a, b) for a, b in zip(want, got, strict=True)) if p]
            verdicts[name] = problems[0] if problems else "ok"
    verdicts["check"] = _gate(path)
    return verdicts


def _gate(path: Path) -> str:
    """``check --runtime onnxruntime --verify onnxruntime``: ok (and its warnings by code), or
    the exit code and the first error."""
    done = subprocess.run(
        [sys.executable, "-m", "onnxforge", "check", "--runtime", "onnxruntime", "--verify",
         "onnxruntime", "--json", "--jobs", "1", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    try:
        problems = [p for f in json.loads(done.stdout)["files"] for p in f["problems"]]
    except (ValueError, KeyError, TypeError):
        problems = []
    if done.returncode:
        errors = [p["message"] for p in problems if p.get("severity") == "error"]
        line = errors[0] if errors else (done.stderr.strip().splitlines() or ["?"])[0]
        return f"exit {done.returncode}: {line[:160]}"
    codes = Counter(p["code"] for p in problems)
    return "ok" + ("".join(f", {n} {code}" for code, n in sorted(codes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--zoo", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "accept.md")
    args = parser.parse_args()
    paths = [p for folder in [*args.folders, FIXTURES] for p in sorted(folder.rglob("*.onnx"))]
    if args.zoo:
        light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
        paths += sorted(light.glob("*.onnx"))
    rows, bad = [], 0
    for path in paths:
        verdicts = check(path)
        bad += sum(not v.startswith("ok") for v in verdicts.values())
        rows.append(f"| {path.parent.name}/{path.name} | " + " | ".join(verdicts.values()) + " |")
        print(rows[-1], file=sys.stderr)
    lines = [
        "# Every command on real models, judged by onnxruntime",
        "",
        f"`python benchmarks/accept.py {' '.join(map(str, args.folders))}"
        f"{' --zoo' if args.zoo else ''}`: {len(paths)} models, "
        f"{len(paths) * (len(COMMANDS) + 1)} runs, {bad} not ok.",
        "",
        "| model | " + " | ".join(COMMANDS) + " | check |",
        "| --- | " + " | ".join("---" for _ in COMMANDS) + " | --- |",
        *rows,
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(lines[2])


if __name__ == "__main__":
    main()
