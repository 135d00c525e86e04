"""PP-OCR's text detectors on rendered text pages: how far each half-precision conversion moves
the probability map where there is text, which random inputs do not show.

    python benchmarks/text_pages.py [--models GLOB,...] [--modes MODE,...] [--pages N] [--out FILE]

Random inputs keep a detector's map saturated (no text anywhere), so ``precision.py``'s judge
sees little of what a conversion does to it. Here each detector of the wild corpus (fetched by
``wild.py fetch``) reads ``--pages`` (4) pages of 640 x 640: lines of words in DejaVu Sans at
14-40 px, dark on white or on paper grey, normalized as PP-OCR feeds its detectors (ImageNet
mean and std, channels first). Each conversion (``MODES``, one calibrated on other rendered
pages) runs as a user would run it, from a copy of the code made at the start; the
original and the result run on onnxruntime (CPU). Per model and mode: the file's size over the
original's, the map's largest difference (a probability: over 1), and the text pixels (map >
0.3, DB's threshold) whose side of it the result changes. Needs pillow (the bench extra) and a
DejaVu Sans font (Debian's fonts-dejavu-core). Results: ``results/text_pages.md``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wild  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "text_pages.md"
DETECTORS = "*PP-OCRv*_det*,*ppocrv5/det/det.onnx"
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
SIDE = 640
THRESHOLD = 0.3
WORDS = ("invoice", "total", "amount", "date", "number", "receipt", "payment", "customer",
         "address", "phone", "2026", "$41.99", "Hello", "World", "OCR", "page", "section",
         "table", "1.25", "kg", "Street", "No.", "17", "ORDER")  # fmt: skip
MODES = {
    "float16": ["--dtype", "float16"],
    "float16 --tolerance 0.1": ["--dtype", "float16", "--tolerance", "0.1"],
    "float16 --calibrate 0": ["--dtype", "float16", "--calibrate", "0"],
    "float16 --calibration pages": ["--dtype", "float16", "--calibration"],
    "weights": ["--weights", "float16"],
    "weights --calibrate 0": ["--weights", "float16", "--calibrate", "0"],
    "occ": [],
    "onnxslim": [],
}
"""onnxforge's commands by their arguments (``--calibration``: a folder of CALIBRATION_PAGES
other pages, rendered as the judged ones are but from another seed; ``weights --calibrate
0``: every weight stored in float16, every op in float32, what a file of half the size costs
at least); ``occ``:
onnxconverter-common's convert_float_to_float16(keep_io_types=True); ``onnxslim``: onnxslim
--dtype fp16."""
CALIBRATION_PAGES = 5
"""Pages of real-looking input for ``--calibration`` (as many as the random calibration's
sets): the route the README gives a user whose model sees what random inputs do not."""
OCC = (
    "import sys, onnx; from onnxconverter_common import float16; "
    "onnx.save(float16.convert_float_to_float16(onnx.load(sys.argv[1]), keep_io_types=True), "
    "sys.argv[2])"
)


def pages(count: int, side: int = SIDE, *, seed: int = 1) -> list[np.ndarray]:
    """``count`` rendered pages as PP-OCR's detectors take them: [1, 3, side, side] float32
    (the judged pages are seed 1's; ``--calibration``'s another seed's)."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    made = []
    for index in range(count):
        paper = (255, 255, 255) if index % 2 == 0 else (235, 230, 220)
        image = Image.new("RGB", (side, side), paper)
        draw = ImageDraw.Draw(image)
        y = 10
        while y < side - 40:
            size = int(rng.integers(14, 40))
            font = ImageFont.truetype(str(FONT), size)
            line = " ".join(str(w) for w in rng.choice(WORDS, int(rng.integers(2, 7))))
            ink = tuple(int(c) for c in rng.integers(0, 90, 3))
            draw.text((int(rng.integers(5, 80)), y), line, fill=ink, font=font)
            y += size + int(rng.integers(4, 30))
        pixels = (np.asarray(image, np.float32) / 255.0 - mean) / std
        made.append(pixels.transpose(2, 0, 1)[None].astype(np.float32))
    return made


def run(path: Path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return [np.asarray(session.run(None, {name: f})[0], np.float64) for f in feeds]


def calibration_folder(name: str, side: int, work: Path) -> Path:
    """CALIBRATION_PAGES pages (seed 2) as --calibration takes them: an .npz per page, the
    array named as the detector's input, ``name``."""
    folder = work / "calibration"
    folder.mkdir(exist_ok=True)
    for index, page in enumerate(pages(CALIBRATION_PAGES, side, seed=2)):
        np.savez(folder / f"page_{index}.npz", **{name: page})
    return folder


def convert(
    mode: str,
    src: Path,
    dst: Path,
    calibration: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, float, str]:
    """Run ``mode`` on ``src`` (in ``env``: main's points PYTHONPATH at a copy of the code
    made at the start, ``wild.snapshot``, so edits during a run change nothing measured):
    exit code, seconds, the last line of its stderr."""
    if mode == "occ":
        cmd = [sys.executable, "-c", OCC, str(src), str(dst)]
    elif mode == "onnxslim":
        cmd = [
            str(Path(sys.executable).parent / "onnxslim"),
            str(src),
            str(dst),
            "--dtype",
            "fp16",
        ]
    else:
        given = MODES[mode] + ([str(calibration)] if "--calibration" in MODES[mode] else [])
        cmd = [*wild._cli(), "convert", str(src), *given, "-o", str(dst), "-q"]
    started = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, errors="replace", check=False, env=env,
        cwd=dst.parent,  # not the work tree: a checkout's own onnxforge/ would come first
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, time.monotonic() - started, lines[-1][:200] if lines else ""


def input_of(path: Path) -> tuple[str, int]:
    """The detector's input: its name, and the page side it takes (its fixed height, 960
    for some, else SIDE)."""
    import onnxruntime as ort

    first = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()[0]
    shape = first.shape
    return first.name, shape[2] if isinstance(shape[2], int) and shape[2] > 0 else SIDE


def measure(
    model: dict[str, Any],
    count: int,
    work: Path,
    env: dict[str, str] | None = None,
    modes: list[str] | None = None,
) -> dict[str, Any]:
    src = Path(model["file"])
    name, side = input_of(src)
    feeds = pages(count, side)
    want = run(src, feeds)
    text = sum(int((w > THRESHOLD).sum()) for w in want)
    record: dict[str, Any] = {
        "id": model["id"], "bytes": src.stat().st_size, "side": side, "text_pixels": text,
    }  # fmt: skip
    calibration = calibration_folder(name, side, work)
    for mode in modes or list(MODES):
        dst = work / f"{mode.replace(' ', '_')}.onnx"
        code, seconds, said = convert(mode, src, dst, calibration, env)
        cell: dict[str, Any] = {"exit": code, "seconds": round(seconds, 1)}
        if code != 0 or not dst.exists():
            cell["error"] = said
        else:
            cell["size_ratio"] = dst.stat().st_size / src.stat().st_size
            try:
                got = run(dst, feeds)
            except Exception as exc:  # onnxruntime refuses the result: that is the finding
                cell["error"] = "onnxruntime: " + str(exc).split("failed:")[-1].strip()[:200]
            else:
                cell["error_max"] = max(
                    float(np.abs(w - g).max()) for w, g in zip(want, got, strict=True)
                )
                cell["flipped"] = sum(
                    int(((w > THRESHOLD) != (g > THRESHOLD)).sum())
                    for w, g in zip(want, got, strict=True)
                )
        record[mode] = cell
        print(f"  {mode}: {_cell(cell)}", flush=True)
    return record


def _cell(cell: dict[str, Any]) -> str:
    if "error_max" not in cell:
        said = cell.get("error", "")
        if said.startswith("error: "):  # onnxforge's line: the file, then why
            said = said.split(": ", 2)[-1]
        return f"failed: {said}"[:120]
    return f"{cell['error_max']:.2g} ({cell['flipped']}) {cell['size_ratio']:.2f}x"


def report(records: list[dict[str, Any]], out: Path, meta: dict[str, Any]) -> None:
    lines = [
        "# PP-OCR's text detectors on rendered text pages",
        "",
        "`python benchmarks/text_pages.py` (see its docstring). "
        f"Code: {meta['code']}; onnxruntime {meta['onnxruntime']}; {meta['pages']} pages of "
        f"{SIDE} x {SIDE} (of the input's sides where it fixes them). Each cell: the "
        "probability map's largest difference from the original's (over 1), in brackets "
        f"the text pixels (map > {THRESHOLD}) whose side of it changes, then the file's "
        "size over the original's. The issue's budget for float16 is 1e-2 of the output's "
        "range; `--tolerance 0.1` is what a user reaching for half the file would give; "
        f"`--calibration pages` calibrates on {CALIBRATION_PAGES} other rendered pages (the "
        "README's route for inputs random ones do not resemble).",
        "",
        "| model | MB | text pixels | " + " | ".join(f"`{m}`" for m in MODES) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in MODES) + " |",
    ]
    for r in records:
        cells = [_cell(r[m]) if m in r else "not run" for m in MODES]
        lines.append(f"| `{r['id']}` | {r['bytes'] / 1e6:.1f} | {r['text_pixels']} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    within = {
        m: sum(1 for r in records if r.get(m, {}).get("error_max", 1.0) <= 1e-2) for m in MODES
    }
    half = {  # of the outputs onnxruntime runs: a smaller file it refuses is no result
        m: sum(1 for r in records if "error_max" in r.get(m, {}) and r[m]["size_ratio"] <= 0.55)
        for m in MODES
    }
    lines += ["", "| mode | within 1e-2 on the pages | at most 0.55x (and run) |"]
    lines += ["| --- | --- | --- |"]
    lines += [f"| `{m}` | {within[m]} of {len(records)} | {half[m]} |" for m in MODES]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "models": records}, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=DETECTORS, help="globs on the wild model ids")
    p.add_argument(
        "--modes",
        default="",
        help="a,b of the modes to run again; the other "
        "cells are kept from --out's json (default: all, the json rewritten)",
    )
    p.add_argument("--pages", type=int, default=4)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()
    try:
        import onnxruntime
        import PIL  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"text_pages.py needs the bench extra ({exc})") from None
    if not FONT.exists():
        raise SystemExit(f"text_pages.py needs {FONT} (Debian: fonts-dejavu-core)")
    cache = wild.cache_dir(None)
    manifest = json.loads((cache / "manifest.json").read_text())["models"]
    globs = [g for g in args.models.split(",") if g]
    todo = [{"id": m["id"], "file": str(cache / m["file"])} for m in manifest
            if any(fnmatch.fnmatch(m["id"], g) for g in globs)]  # fmt: skip
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}: {', '.join(MODES)}")
    stored = args.out.with_suffix(".json")
    kept = json.loads(stored.read_text()) if modes and stored.exists() else None
    records = list(kept["models"]) if kept else []
    with tempfile.TemporaryDirectory(prefix="onnxforge-pages-") as scratch:
        snap = wild.snapshot(Path(scratch) / "code")
        head = snap["commit"] + (f" + modified {', '.join(snap['modified'])}"
                                 if snap["modified"] else "")  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(scratch) / "code")}
        meta = {"code": head, "onnxruntime": onnxruntime.__version__, "pages": args.pages}
        if kept:  # the cells run now say their code beside the others'
            named = ", ".join(f"`{m}`" for m in modes)
            meta["code"] = f"{kept['meta']['code']}; {named}: {head}"
        for index, model in enumerate(todo, 1):
            print(f"[{index}/{len(todo)}] {model['id']}", flush=True)
            work = Path(scratch) / str(index)
            work.mkdir()
            record = measure(model, args.pages, work, env, modes)
            old = next((r for r in records if r["id"] == model["id"]), None)
            if old is not None:
                old.update(record)
            else:
                records.append(record)
            report(records, args.out, meta)


if __name__ == "__main__":
    main()
