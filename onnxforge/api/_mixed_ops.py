"""The automatic mixed precision of ``--dtype``: which ops stay float32 when a model goes to
float16 or bfloat16 (``choose_float32_ops``)."""

from __future__ import annotations

__all__ = [
    "choose_float32_ops",
]

import logging
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import ml_dtypes
import numpy as np

from onnxforge._cleanup import temporary_folder
from onnxforge.api._mixed_runs import (
    _NUMPY,
    DEFAULT_MAX_ROUNDS,
    Feeds,
    MixedPrecision,
    _by_name,
    _copy,
    _dtype,
    _key,
    _largest,
    _Measured,
    _name,
    _num,
    _rounded,
    _Runs,
    _target,
    _upstream,
)
from onnxforge.api._mixed_weights import choose_float32_weights, float32_weight_tensors
from onnxforge.api.compare import (
    HALF_TOLERANCE,
    range_error,
)
from onnxforge.ir import (
    DType,
    Graph,
    Model,
    Op,
    Tensor,
    TensorType,
    Value,
    constant_tensor,
    walk_graphs,
)
from onnxforge.passes import ConvertPrecisionPass
from onnxforge.passes.convert_precision import PARAMETER_READERS

logger = logging.getLogger(__name__)

WEIGHTS_FIRST_SHARE = 0.75
"""``_with_weights_first`` aims the weights alone at half the tolerance and takes up to this
share of it (its rounds do not come down evenly: caustic's 5.1e-3, 7.8e-3, 3.3e-3, 6.2e-3
against 2.5e-3); the ops are held to what they leave."""

GIVE_BACK = 4
"""``_given_back`` tries at most this many of the largest float32 weights."""

_QUANTIZERS = frozenset({"QuantizeLinear", "DynamicQuantizeLinear"})


def choose_float32_ops(
    model: Model,
    dtype: str,
    feeds: Feeds,
    *,
    tolerance: float = HALF_TOLERANCE,
    keep_io_types: bool = True,
    keep_float32: Mapping[str, str] | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    budget: float | None = None,
) -> MixedPrecision:
    """The ops of ``model``'s main graph to keep in float32 when converting it to ``dtype``
    (an op holding a body is kept with every op inside), measured on onnxruntime (each run in
    a child process) on ``feeds``; ``keep_float32`` entries are kept as given. ``model`` is
    not changed.

    1. Range: the float32 model runs with every float value exposed. A value whose finite
       values pass the type's largest (float16's 65504), or whose nonzero values all round
       to 0 in it, keeps its producer and its readers (which would read it through a Cast).
    2. Error: the model converted with what is kept runs with the values it shares with the
       float32 model exposed. While an output's ``range_error`` passes ``tolerance``, the
       converted ops upstream of it whose error grows most (their output's error minus their
       inputs' largest) are kept, and it converts again; ``max_rounds`` conversions at most,
       and a third as many more while an output is past ``budget`` (what the caller will
       hold the result to; ``tolerance`` is what the rounds aim at, by default the same).
       The result says what the last one measured (``MixedPrecision.met``).

    A converted model is measured on its float32 twin (``_emulate``): every op computes in
    float32 and every half value is rounded to the half type, as a device computing in the
    half type stores it. onnxruntime's CPU provider cannot measure the half model itself: it
    has no bfloat16 arithmetic, and it runs float16 ops it has no float16 kernel for in
    float32, behind Casts it drops between them, so a chain of them never rounds (in 1.31,
    d = (1000 x + x) - 1000 x in float16 comes back as x to 1e-6).
    """
    target = _target(dtype, feeds)
    with temporary_folder("onnxforge-mixed-") as folder:
        chooser = _Chooser(
            model, target, feeds, folder, tolerance=tolerance, keep_io_types=keep_io_types
        )
        chooser.budget = tolerance if budget is None else budget
        found = chooser.choose(dict(keep_float32 or {}), max(1, max_rounds))
        found.runtime_kept = frozenset(chooser.runtime_kept)
        return found


class _Chooser(_Runs):
    """``choose_float32_ops``'s state: the half type, the budget, and the main-graph ops the
    last conversion converted."""

    def __init__(
        self,
        model: Model,
        target: int,
        feeds: Feeds,
        folder: Path,
        *,
        tolerance: float,
        keep_io_types: bool,
    ) -> None:
        super().__init__(model, feeds, folder)
        self.target = target
        self.tolerance = tolerance
        self.keep_io_types = keep_io_types
        self.converted: set[str] = set()
        self.refused: dict[str, str] = {}  # ops onnxruntime cannot run in the half type
        self.runtime_kept: set[str] = set()  # every op kept for that, in any round
        self.last_keep: dict[str, str] = {}  # what the last conversion kept
        self.optimized: list[dict[str, np.ndarray]] | str | None = None  # _real_outputs' want
        self.store_kept_weights = False  # the kept ops' weights stored in the half type
        self.stored: list[str] = []  # the weights the last conversion stored so
        self.float32_weights: dict[str, str] = {}  # of the kept ops, stored as they are
        self.asked: dict[str, str] = {}  # what the caller kept float32
        self.weights_missed = False  # the weights chosen alone missed their share

    def choose(
        self, keep: dict[str, str], max_rounds: int, *, weights_settled: bool = False
    ) -> MixedPrecision:
        """What stays float32 (``choose_float32_ops``); ``weights_settled``: how the kept
        ops' weights are stored is already set (``_with_weights_first``), not tried."""
        self.asked = dict(keep)  # the caller's: their ops' weights stay as they are
        largest = self._range()
        plain = self._convert(keep)
        converted = _converted(self.base, plain, self.target)
        found = {**self._grid_keeps(converted), **self._range_keeps(largest, converted)}
        for key, reason in found.items():
            self._keep(keep, key, reason)
        conv = self._convert(keep) if found else plain
        chosen = self._rounds(keep, conv, max_rounds, more=max_rounds // 3)
        if weights_settled or not chosen.met:
            return chosen
        return self._with_kept_weights_stored(chosen, max_rounds)

    def _with_kept_weights_stored(self, chosen: MixedPrecision, max_rounds: int) -> MixedPrecision:
        """``chosen`` with the weights its float32 ops read stored in the half type (a file
        of float32 convolutions kept for their error is no smaller, and their weights'
        rounding alone is mostly far within the budget: craftnet kept 51 and was 0.78x the
        original), measured so; where that misses the tolerance, more rounds keep more ops
        float32, which now costs no bytes (g2p-id's BERT: 4.7e-3, 6.6e-3 with the weights
        stored, 3.7e-3 after 5 rounds at 0.53x the original, 0.74x without), half of
        ``max_rounds`` at most; then with the stored weights that move the outputs most kept
        float32 (``_with_some_kept_weights_stored``). As it was, with no weights stored so,
        when none passes (the estimates too: a Sigmoid's input near 0 moved 4e-2 of
        Multilingual det's range)."""
        self.store_kept_weights = True
        keep = dict(chosen.keep)
        conv = self._convert(keep)
        stored = list(self.stored)
        if stored:
            more = self._rounds(keep, conv, max(1, max_rounds // 2))
            if all(e <= self.tolerance for e in more.errors.values()):
                more.rounds += chosen.rounds
                more.store_kept_weights = True
                return more
            worst = max(more.errors.values(), default=0.0)
            logger.info("mixed precision: the kept ops' weights stored %s miss it (%.3g)",
                        _name(self.target), worst)  # fmt: skip
            some = self._with_some_kept_weights_stored(chosen, stored, max_rounds)
            if some is None and not self.weights_missed:
                some = self._with_weights_first(chosen, stored, max_rounds)
            if some is not None:
                return some
        self.store_kept_weights = False
        self.float32_weights = {}
        return chosen

    def _with_some_kept_weights_stored(
        self, chosen: MixedPrecision, stored: Sequence[str], max_rounds: int
    ) -> MixedPrecision | None:
        """``chosen`` with the weights its float32 ops read stored in the half type but those
        whose rounding moves the outputs most, which stay float32; None where that misses
        the tolerance too, or keeps every one. Which: ``choose_float32_weights`` on the
        float32 model with only ``stored`` open to it (a quarter of ``max_rounds``, on this
        chooser's float32 run), held first to what ``chosen``'s own error leaves of the
        tolerance as errors that add in quadrature, then, where the two together miss it, to
        that share of it scaled by how much more the weights moved the outputs beside the
        half ops than alone (the ops carry their rounding on, or cancel it). craftnet: its 43
        float32 ops' weights measured 6.0e-3 stored against an aim of 5e-3, so all stayed
        float32 and the file was 0.65x the original; now 21 do, at 0.51x."""
        worst = max(chosen.errors.values(), default=0.0)
        room = math.sqrt(max(self.tolerance**2 - worst**2, 0.0))
        open_ = set(stored)
        for attempt in range(2):
            if room <= self.tolerance / 20:
                return None
            weights = choose_float32_weights(
                self.base, _name(self.target), self.feeds, tolerance=room,
                only=open_, max_rounds=max(1, max_rounds // 4), float32_run=self,
            )  # fmt: skip
            self.float32_weights = {w: why for w, why in weights.keep.items() if w in open_}
            self.weights_missed = attempt == 0 and not weights.met  # not for its share
            if not weights.met or self.float32_weights.keys() == open_:
                return None  # the weights alone miss it, or ``chosen`` as it is
            keep = dict(chosen.keep)
            more = self._rounds(keep, self._convert(keep), max(1, max_rounds // 4))
            together = max(more.errors.values(), default=0.0)
            if together <= self.tolerance:
                return self._given_back(self._as_stored(more, chosen.rounds + weights.rounds))
            alone = max(weights.errors.values(), default=0.0)
            logger.info("mixed precision: with %d of %d kept weights float32: %.3g (alone %.3g)",
                        len(self.float32_weights), len(open_), together, alone)  # fmt: skip
            if together <= worst or alone <= 0:
                return None
            room = min(room, alone) * (self.tolerance - worst) / (together - worst)
        return None

    def _with_weights_first(
        self, chosen: MixedPrecision, stored: Sequence[str], max_rounds: int
    ) -> MixedPrecision | None:
        """The choice made the other way round, where ``chosen``'s ops leave its kept ops'
        weights no room: the weights first (``choose_float32_weights`` with every weight
        open, held to half the tolerance, a quarter of ``max_rounds``), then the ops, chosen
        anew on the model with the other weights rounded to the half type, held to what the
        weights left of the tolerance (errors that add at most), and measured once more on
        the model itself. None where the weights alone miss their share, or the two together
        miss the tolerance (the estimates too, as the other kept-weights steps hold them:
        PP-OCRv5 mobile's detector met it on its outputs with a Sigmoid's estimate at 2.9e-2,
        and was 0.13 off on rendered text, where it had been 4.1e-2), or their file holds
        no fewer float32 weight values than ``chosen``'s with its kept ops' weights as they
        are (the ops chosen anew may keep more of the weights held float32). A file is its
        weights; an op kept float32 costs none of them (caustic: its ops alone measured
        4.8e-3 against an aim of 5e-3, so its 55 kept ops' weights stayed float32 and the
        file was 0.75x the original)."""
        name = _name(self.target)
        weights = choose_float32_weights(
            self.base, name, self.feeds, tolerance=self.tolerance / 2,
            max_rounds=max(1, max_rounds // 4), float32_run=self,
        )  # fmt: skip
        alone = max(weights.errors.values(), default=0.0)
        tensors = float32_weight_tensors(self.base)
        held = sum(tensors[w].size for w in weights.keep if w in tensors)
        missed = not alone <= self.tolerance * WEIGHTS_FIRST_SHARE
        if missed or held >= sum(tensors[w].size for w in stored if w in tensors):
            logger.info("mixed precision: weights first: %s (%d of %d elements float32)",
                        f"the weights alone miss ({alone:.3g})" if missed else "no smaller",
                        held, sum(t.size for t in tensors.values()))  # fmt: skip
            return None
        self.store_kept_weights = False
        before = _float32_elements(self._converted_copy(chosen.keep))  # ``chosen``'s file
        self.store_kept_weights, self.float32_weights = True, dict(weights.keep)
        every = {_key(op): "" for op in self.base.graph.ops if _key(op)}
        self._converted_copy(every)  # which weights the kept ops would store: self.stored
        rounded = _with_rounded(self.base, set(self.stored), self.target)
        with temporary_folder("onnxforge-mixed-") as folder:
            ops = _Chooser(
                rounded, self.target, self.feeds, folder,
                tolerance=self.tolerance - alone, keep_io_types=self.keep_io_types,
            )  # fmt: skip
            ops.budget = self.budget - alone
            ops.store_kept_weights, ops.float32_weights = True, dict(weights.keep)
            found = ops.choose(dict(self.asked), max_rounds, weights_settled=True)
            self.runtime_kept |= ops.runtime_kept
        keep = dict(found.keep)
        conv = self._convert(keep)
        after = _float32_elements(conv)  # before the measure makes it float32 throughout
        last = self._rounds(keep, conv, 1)
        together = max(last.errors.values(), default=0.0)
        logger.info("mixed precision: weights first: %d of %d weights float32 (%.3g), %d ops "
                    "(%.3g), together %.3g; float32 weight values %d, %d before",
                    len(weights.keep), len(tensors), alone, len(keep),
                    max(found.errors.values(), default=0.0), together, after, before)  # fmt: skip
        if not together <= self.tolerance or after >= before:
            return None  # it misses, or its ops keep more weights float32 than ``chosen``'s
        earlier = chosen.rounds + weights.rounds + found.rounds
        return self._given_back(self._as_stored(last, earlier))  # float32_weights: weights'

    def _as_stored(self, found: MixedPrecision, earlier: int) -> MixedPrecision:
        """``found``, measured with the kept ops' weights stored half but
        ``float32_weights``, marked so, its rounds counted after ``earlier`` ones."""
        found.rounds += earlier
        found.store_kept_weights = True
        found.float32_weights = dict(self.float32_weights)
        return found

    def _given_back(self, chosen: MixedPrecision) -> MixedPrecision:
        """``chosen`` (its kept ops' weights stored half but ``float32_weights``) with those
        weights stored half after all, the largest first (``GIVE_BACK`` of them at most),
        each where the model measured so still meets the tolerance, the estimates too. The
        weights were chosen against a share of it (what the ops leave, or
        ``WEIGHTS_FIRST_SHARE``), a split made to search by, not a bound: what the two do
        together is (caustic: its 49,280-value input projection stayed float32 for 2.8e-3
        of its output's range with 2.9e-3 measured together, against 5e-3)."""
        tensors = float32_weight_tensors(self.base)
        held = [w for w in self.float32_weights if w in tensors]
        held.sort(key=lambda w: tensors[w].size, reverse=True)
        for weight in held[:GIVE_BACK]:
            why = self.float32_weights.pop(weight)
            keep = dict(chosen.keep)
            trial = self._rounds(keep, self._convert(keep), 1)
            worst = max(trial.errors.values(), default=0.0)
            logger.info("mixed precision: %r stored %s too: %.3g", weight, _name(self.target),
                        worst)  # fmt: skip
            if worst <= self.tolerance:
                chosen = self._as_stored(trial, chosen.rounds)
            else:
                self.float32_weights[weight] = why
        return chosen

    # -- step 1: range -----------------------------------------------------------------------
    def _range(self) -> dict[str, float]:
        """Run the float32 model with every float value exposed: the largest finite magnitude
        of each (keeping the arrays as the reference when they fit in one run). Its float
        constants are clamped first, as the conversion clamps them (a -1e9 mask fill becomes
        -65504): a value they alone take past the range converts fine."""
        largest = self._run_float32(self._clamped())
        if self.keep_io_types:  # a float32 input reaches its readers through a Cast
            for value in self.base.graph.inputs:
                arrays = [f[value.name] for f in self.feeds if value.name in f]
                if value.const is None and arrays and arrays[0].dtype == np.float32:
                    largest[value.name] = max(_largest(a) for a in arrays)
        return largest

    def _clamped(self) -> Model:
        """The float32 model with float constants past the target's range clamped to it, as
        the conversion clamps them: but for a parameter (``PARAMETER_READERS``), whose op the
        conversion keeps float32 (the model itself when none are)."""
        top = float(ml_dtypes.finfo(_NUMPY[DType(self.target)]).max)

        def clamp(tensor: Tensor) -> Tensor | None:
            if tensor.dtype != DType.FLOAT:
                return None
            array = tensor.numpy()
            over = np.isfinite(array) & (np.abs(array) > top)
            if not over.any():
                return None
            return Tensor.from_numpy(np.where(over, np.sign(array) * np.float32(top), array))

        copy = _copy(self.base)
        changed = False
        for graph in walk_graphs(copy.graph):
            for value in graph.initializers:
                made = clamp(value.const) if isinstance(value.const, Tensor) else None
                if made is not None and not _a_parameter(graph, value):
                    value.const, changed = made, True
            for op in graph.ops:
                key = {"Constant": "value", "ConstantOfShape": "value"}.get(op.op_type)
                given = op.attrs.get(key) if key else None
                made = clamp(given) if isinstance(given, Tensor) else None
                if op.op_type == "Constant" and _a_parameter(graph, op._outputs[0]):
                    made = None
                if made is not None:
                    op.attrs[key] = made  # type: ignore[index]
                    graph.touch(op)
                    changed = True
        return copy if changed else self.base

    def _range_keeps(self, largest: Mapping[str, float], converted: set[str]) -> dict[str, str]:
        """Producers and readers of the values the target type cannot hold (of the ops that
        convert), with the reason."""
        info = ml_dtypes.finfo(_NUMPY[DType(self.target)])
        top, tiny = float(info.max), float(info.smallest_subnormal)
        name = _name(self.target)
        graph = self.base.graph
        found: dict[str, str] = {}
        readers: dict[str, str] = {}
        for value_name, big in largest.items():
            if big > top:
                why = f"values up to {big:.2g} exceed {name}'s {top:g}"
            elif 0 < big <= tiny / 2:
                why = f"its nonzero values (up to {big:.2g}) all round to 0 in {name}"
            else:
                continue
            value = self.values[value_name]
            producer = graph.producer(value)
            if producer is not None and _key(producer) in converted:
                found.setdefault(_key(producer), why)
            for op, _ in graph.uses(value):
                if _key(op) in converted:
                    readers.setdefault(_key(op), f"reads {value_name!r}: {why}")
        for key, why in readers.items():
            found.setdefault(key, why)
        return found

    def _grid_keeps(self, converted: set[str]) -> dict[str, str]:
        """The converted ops a QuantizeLinear's or DynamicQuantizeLinear's input depends on,
        with the reason: rounding there moves every value near a step of its grid across
        it, a whole step (sscd's quantized ResNet: 2.7e-3 of the range at its first
        QuantizeLinear, 5.6e-2 after it, 0.35 at the output; no round of keeping the
        largest growth catches up); a dynamic grid's scale moves with the values too
        (traceforge's T5 decoder: 0.47 from round 1)."""
        graph = self.base.graph
        quantizers = [
            op for op in graph.ops if op.op_type in _QUANTIZERS and op.domain in ("", "ai.onnx")
        ]
        reads = [op._inputs[0] for op in quantizers if op._inputs and op._inputs[0] is not None]
        kinds = " or ".join(sorted({op.op_type for op in quantizers}))
        why = (
            f"a {kinds} reads what it computes ({len(quantizers)} in the model): "
            f"{_name(self.target)} rounding moves values near a step of the grid across it"
        )
        ops = _upstream(graph, reads) | set(quantizers)
        return {_key(op): why for op in ops if _key(op) in converted}

    # -- step 2: error -----------------------------------------------------------------------
    def _measure_round(self, conv: Model) -> _Measured:
        """Run the converted model's emulation (``conv`` becomes it) and the float32 model;
        a float16 model also runs as it is, and each output's error is the larger of the two:
        onnxruntime's float16 kernels (MatMul, Conv, Softmax) accumulate their own way, which
        the emulation's float32 arithmetic does not see (PP-OCR's classifier: 6.7e-2 there,
        under 1e-2 emulated)."""
        self.converted = _converted(self.base, conv, self.target)
        real = self._real_outputs(conv) if self.target == DType.FLOAT16 else {}
        _emulate(conv, self.target)
        what = f"the float32 emulation of the {_name(self.target)} model"
        measured = self._measure(conv, self._feeds_for(), what)
        emulated_met = all(e <= self.tolerance for e in measured.outputs.values())
        if not self.refused and emulated_met and any(e > self.tolerance for e in real.values()):
            # Only onnxruntime's float16 kernels miss the budget: the growth is found in
            # their own values (the emulation's would point nowhere, round after round).
            half = self._converted_copy(self.last_keep)
            seen = self._measure(half, self._half_feeds(half), "the float16 model")
            for name, error in seen.values.items():
                measured.values[name] = max(measured.values.get(name, 0.0), error)
        for name, error in real.items():
            measured.outputs[name] = max(measured.outputs.get(name, 0.0), error)
        return measured

    def _half_feeds(self, conv: Model) -> list[dict[str, np.ndarray]]:
        """The feeds as ``conv`` takes them: float16 where it retyped an input."""
        return [
            {k: v.astype(np.float16) if _is_half_input(conv, k) else v for k, v in f.items()}
            for f in self.feeds
        ]

    def _real_outputs(self, conv: Model) -> dict[str, float]:
        """Each graph output's largest error with ``conv`` run as it is (nothing exposed, so
        onnxruntime computes it as a user's session does). Where onnxruntime names a node it
        cannot run (a kernel its CPU provider lacks in float16 for that form: ScatterElements
        with a reduction, Resize cubic), ``refused`` gets it and every converted op of the
        same form, and each output's error is infinite; any other failure is bisected
        (``_culprit``); empty when that finds nothing. The float32 outputs are the range
        model's run the same way, once (its optimizer turns a quantized model's
        QuantizeLinear, Conv and DequantizeLinear into integer kernels: sscd's embedding
        moves 9e-3 of its range that way, float32 or not)."""
        sets = range(len(self.feeds))
        if self.optimized is None:
            self.optimized = self._run(self.base, [], sets, "float32-outputs.onnx",
                                       runtime="onnxruntime")  # fmt: skip
        want = self.optimized
        given = self._half_feeds(conv)
        got = self._run(conv, [], sets, "float16-outputs.onnx", given, runtime="onnxruntime")
        self.refused = {}
        if isinstance(got, str):
            self.refused = self._refused(conv, got) or self._culprit(got, given[0])
            self.runtime_kept.update(self.refused)
        if self.refused:
            return dict.fromkeys(self.outputs, math.inf)
        if isinstance(want, str) or isinstance(got, str):
            return {}
        found: dict[str, float] = {}
        for w, g in zip(want, got, strict=True):
            for name in self.outputs:
                if name in w and name in g and name not in self.random:
                    error = self._output_error(name, w[name], g[name])
                    found[name] = max(found.get(name, 0.0), error)
        return found

    def _counts(self) -> bool:
        return not self.refused

    def _refused(self, conv: Model, error: str) -> dict[str, str]:
        """The converted ops of the form onnxruntime's ``error`` names a node of (same type,
        domain and attributes; of an unnamed node, every one of its type): key -> why; empty
        when it names none of them."""
        match = _NODE_IN_ERROR.search(error)
        if match is None:
            return {}
        op_type = match["type"] or match["type2"]
        named = match["name"] or match["name2"] or match["name3"]
        failed = next((op for op in conv.graph.ops if named and op.name == named), None)
        if failed is not None:
            form = (failed.op_type, failed.domain, _attrs(failed))
            same = [op for op in conv.graph.ops if (op.op_type, op.domain, _attrs(op)) == form]
        elif op_type and not named:
            same = [op for op in conv.graph.ops if op.op_type == op_type]
        else:
            return {}
        why = "onnxruntime cannot run it in " + _name(self.target)
        why += ": " + error.split("Status Message: ", 1)[-1][:160]
        return {_key(op): why for op in same if _key(op) in self.converted}

    def load_guard(self, keep: dict[str, str]) -> dict[str, str]:
        """``keep`` with what keeps onnxruntime from failing as it loads the conversion (its
        optimizer runs at load: no input needed), for a model random inputs do not run: as
        in a calibration, the ops of the form a message names, else the bisection's."""
        for _ in range(DEFAULT_MAX_ROUNDS):
            conv = self._convert(keep)
            self.converted = _converted(self.base, conv, self.target)
            got = self._run(conv, [], range(0), "load.onnx", [], runtime="onnxruntime")
            found = {}
            if isinstance(got, str):
                found = self._refused(conv, got) or self._culprit(got, None)
            if not found:
                break
            keep.update(found)
            self.runtime_kept.update(found)
        return keep

    def _culprit(self, error: str, feeds: Mapping[str, np.ndarray] | None) -> dict[str, str]:
        """The converted op that, kept float32, stops onnxruntime failing on the model (where
        no message names a converted node): the first k converted ops (in order) are kept for
        the smallest k whose conversion loads and runs, found by bisection; empty when keeping
        them all does not stop it. Without ``feeds``, each probe is loaded only. (onnxruntime
        1.31's optimizer crashes on a float16 Transpose of a batch axis feeding a MatMul, which
        has no float16 CPU kernel: onnxruntime#28392, PP-OCR's recognizers; its transpose
        optimizer moves a ViT's Transpose through a Cast pair and the cubic Resize it kept in
        float32 then fails its scale check.)"""
        keep = self.last_keep
        order = [_key(op) for op in self.base.graph.topo_order() if _key(op) in self.converted]

        def fails(count: int) -> bool:
            probe = self._converted_copy({**keep, **dict.fromkeys(order[:count], "")})
            sets = [] if feeds is None else [feeds]
            got = self._run(probe, [], range(len(sets)), "probe.onnx", sets, runtime="onnxruntime")
            return isinstance(got, str)

        low, high = 0, len(order)
        if not order or fails(high):
            return {}
        while high - low > 1:
            middle = (low + high) // 2
            if fails(middle):
                low = middle
            else:
                high = middle
        culprit = order[high - 1]
        logger.info("mixed precision: onnxruntime fails unless %r stays float32", culprit)
        why = f"onnxruntime fails on the model with it in {_name(self.target)}: {error[:200]}"
        return {culprit: why}

    def _pick(
        self, measured: _Measured, keep: Mapping[str, str], failing: Sequence[str]
    ) -> dict[str, str]:
        """The ops onnxruntime cannot run in the half type, if it named one; else the ops
        whose error grows most: within half of the largest growth in the first round, a
        quarter in the second, and so on (a budget missed by a hair after a few rounds is met
        by the next, not given up: PP-OCRv5's recognizer was 1.02e-2 after 8)."""
        if self.refused:
            return dict(self.refused)
        grown = self._growth(measured, self.converted, set(keep), failing)
        most = max(grown.values(), default=(0.0, ""))[0]
        floor = most / 2 ** max(1, self.round)
        return {key: why for key, (growth, why) in grown.items() if growth >= floor}

    def _growth(
        self, measured: _Measured, converted: set[str], keep: set[str], failing: Sequence[str]
    ) -> dict[str, tuple[float, str]]:
        """Ops to keep, upstream of the failing outputs: key -> (how much error grows, why).

        1. A converted op whose output's error passes its inputs' largest: by the difference.
        2. An op already in float32 whose error grows amplifies its inputs' (a difference of
           nearly equal numbers): the converted ops that make its inputs, by its growth.

        A float value the converted model lost (a Cast it removed) carries its producer's
        inputs' error.
        """
        graph = self.base.graph
        errors = {v.name: self._input_error(v) for v in graph.inputs}
        upstream = _upstream(graph, [self.values[n] for n in failing])
        found: dict[str, tuple[float, str]] = {}

        def add(key: str, growth: float, reason: str) -> None:
            if key in converted and key not in keep and growth > found.get(key, (0.0, ""))[0]:
                found[key] = (growth, reason)

        for op in graph.topo_order():
            reads = [v for v in op.reads() if v.name in errors]
            before = max((errors[v.name] for v in reads), default=0.0)
            outs = [v.name for v in op._outputs if v is not None and v.name in self.floats]
            for name in outs:
                errors[name] = measured.values.get(name, before)
            if not outs or op not in upstream:
                continue
            after = max(errors[n] for n in outs)
            if after == math.inf:
                growth = 0.0 if before == math.inf else math.inf
            else:
                growth = after - before
            if growth <= 0:
                continue
            key = _key(op)
            if key in converted:  # Case 1
                add(key, growth, f"error grows from {_num(before)} to {_num(after)}")
                continue
            for value in reads:  # Case 2
                producer = graph.producer(value)
                if producer is not None and errors[value.name] > 0:
                    add(
                        _key(producer),
                        growth,
                        f"its error {_num(errors[value.name])} grows to {_num(after)} in "
                        f"{key!r}, which stays float32",
                    )
        return found

    def _input_error(self, value: Value) -> float:
        """A graph input's error: 0 when it keeps its type, its rounding otherwise."""
        if self.keep_io_types or value.const is not None or _dtype(value) != DType.FLOAT:
            return 0.0
        errors = [range_error(f[value.name], _rounded(f[value.name], self.target))[1]
                  for f in self.feeds if value.name in f]  # fmt: skip
        return max(errors, default=0.0)

    # -- converting --------------------------------------------------------------------------
    def _convert(self, keep: Mapping[str, str]) -> Model:
        self.last_keep = dict(keep)
        return self._converted_copy(keep)

    def _converted_copy(self, keep: Mapping[str, str]) -> Model:
        conv = _copy(self.base)
        done = ConvertPrecisionPass(
            _name(self.target),
            keep_io_types=self.keep_io_types,
            keep_float32=keep,
            store_kept_weights=self.store_kept_weights,
            asked=self.asked,
            float32_weights=self.float32_weights,
        )(conv)
        self.stored = done.details.get("weights_compressed", [])
        return conv

    def _keep(self, keep: dict[str, str], key: str, reason: str) -> None:
        """Keep the op ``key``, and every op in its bodies."""
        keep.setdefault(key, reason)
        value = self.values.get(key)
        op = self.base.graph.producer(value) if value is not None else None
        for sub in op.subgraphs() if op is not None else ():
            for body in walk_graphs(sub):
                for inner in body.ops:
                    if _key(inner) and inner.op_type != "Constant":  # converted by readers
                        keep.setdefault(_key(inner), f"{reason} (in the body of {key!r})")

    def _feeds_for(self) -> Feeds:
        """The feeds as the emulation takes them: with keep_io_types off, float32 inputs
        rounded to the half type."""
        if self.keep_io_types:
            return self.feeds
        halves = {
            v.name for v in self.base.graph.inputs if v.const is None and _dtype(v) == DType.FLOAT
        }
        made = []
        for feeds in self.feeds:
            made.append(dict(feeds))
            for name in halves & set(feeds):
                made[-1][name] = _rounded(feeds[name], self.target)
        return made


# -- helpers ------------------------------------------------------------------------------------
def _float32_elements(model: Model) -> int:
    """How many float32 weight values ``model`` holds (what its file's size depends on,
    beside the half ones)."""
    return sum(t.size for t in float32_weight_tensors(model).values())


def _with_rounded(model: Model, names: set[str], target: int) -> Model:
    """A copy of ``model`` whose weights ``names`` (``float32_weight_tensors``') hold their
    values rounded to ``target`` (still float32): what storing them so and casting back
    computes."""
    copy = _copy(model)
    for graph in walk_graphs(copy.graph):
        for value in graph.initializers:
            if value.name in names and isinstance(value.const, Tensor):
                value.const = Tensor.from_numpy(_rounded(value.const.numpy(), target))
        for op in graph.ops:
            out = op._outputs[0] if op.op_type == "Constant" and op._outputs else None
            given = constant_tensor(op) if out is not None and out.name in names else None
            if given is not None:
                op.attrs = {"value": Tensor.from_numpy(_rounded(given.numpy(), target))}
                graph.touch(op)
    return copy


def _is_half_input(model: Model, name: str) -> bool:
    value = next((v for v in model.graph.inputs if v.name == name), None)
    return value is not None and _dtype(value) == DType.FLOAT16


_NODE_IN_ERROR = re.compile(
    r"running (?P<type>\w+) node\. Name:'(?P<name>[^']*)'"
    r"|implementation for (?P<type2>\w+)\(\d+\) node with name '(?P<name2>[^']*)'"
    r"|of node \((?P<name3>[^)]*)\)"
)
"""Where onnxruntime's errors name the node they fail on (at run, at load, in type checks)."""


def _a_parameter(graph: Graph, value: Value | None) -> bool:
    """Whether an op of ``PARAMETER_READERS`` reads ``value``: clamped, it changes what the op
    computes for every input, so the conversion keeps the op float32 instead."""
    readers = graph.uses(value) if value is not None else ()
    return any(op.op_type in PARAMETER_READERS for op, _ in readers)


def _attrs(op: Op) -> str:
    """An op's attributes, comparable (those holding graphs by name only)."""
    return repr(
        sorted((k, v if not isinstance(v, Graph) else "graph") for k, v in op.attrs.items())
    )


def _converted(base: Model, conv: Model, target: int) -> set[str]:
    """Keys of ``base``'s main-graph ops that read or make a ``target`` value in ``conv``
    (found by their first output's name; a graph output keep_io_types gave a Cast names the
    Cast, whose input is the op's output renamed)."""
    values = _by_name(conv.graph)
    names = set(_by_name(base.graph))
    outputs = set(conv.graph.outputs)
    found = set()
    for op in base.graph.ops:
        key = _key(op)
        made = values.get(key)
        twin = conv.graph.producer(made) if made is not None else None
        if twin is not None and twin.op_type == "Cast" and made in outputs:
            inner = twin._inputs[0]
            if inner is not None and inner.name not in names:
                twin = conv.graph.producer(inner)
        if twin is None:
            continue
        if any(_dtype(v) == target for v in [*twin._inputs, *twin._outputs] if v is not None):
            found.add(key)
    return found


def _emulate(model: Model, target: int) -> None:
    """Make a converted model float32 throughout, each ``target`` value rounded to it: an op
    that made one computes in float32 and its output goes through Cast(to=target) and
    Cast(to=float) under its name; a Cast to ``target`` is followed by a Cast to float;
    ``target`` constants become float32 (the same numbers)."""
    for graph in model.graphs(functions=False):
        for op in graph.ops:
            for key, attr in op.attrs.items():
                if isinstance(attr, Tensor) and attr.dtype == target:
                    op.attrs[key] = Tensor.from_numpy(attr.numpy().astype(np.float32))
            if op.op_type == "Cast":  # the conversion's Casts have no declared type
                made = [v for v in op._outputs[:1] if v is not None and op.attr("to") == target]
            elif op.op_type != "Constant":
                made = [v for v in op._outputs if v is not None and _dtype(v) == target]
            else:
                made = []
            if made and op.op_type != "Cast":
                for key in ("dtype", "to"):
                    if op.attrs.get(key) == target:
                        op.attrs[key] = int(DType.FLOAT)
            for value in made:
                _round_after(graph, op, value, target)
        kept = {
            v for op in graph.ops if op.op_type == "Cast" for v in op._outputs if v is not None
        }  # Casts to target: made by the conversion or by _round_after
        for value in list(graph.values()):
            if value._graph is not graph or value in kept:
                continue
            if isinstance(value.const, Tensor) and value.const.dtype == target:
                value.const = Tensor.from_numpy(value.const.numpy().astype(np.float32))
            t = value.type
            if isinstance(t, TensorType) and t.dtype == target:
                value.type = TensorType(DType.FLOAT, t.shape)


def _round_after(graph: Graph, op: Op, value: Value, target: int) -> None:
    """Readers of ``value`` (and the graph's outputs) read it rounded to ``target`` and back,
    under its name; ``value`` itself is renamed."""
    t = value.type
    shape = t.shape if isinstance(t, TensorType) else None
    name = value.name
    fresh = graph.fresh_name(f"{name}_unrounded")
    if any(isinstance(key, tuple) for _, key in graph.uses(value)):
        graph.rename(value, fresh)  # a body reads it: its capture keys follow
    else:
        value.name = fresh  # Graph.rename walks every body of the model: quadratic here
    first = value
    if op.op_type != "Cast":  # a Cast to target makes the rounded value itself
        rounded = graph.fresh_name(f"{name}_rounded")
        rounding = graph.add_op("Cast", [value], output_names=[rounded], to=int(target))
        first = graph.outputs_of(rounding)[0] or value
        first.type = TensorType(target, shape)
    back = graph.add_op("Cast", [first], output_names=[name], to=int(DType.FLOAT))
    out = graph.outputs_of(back)[0]
    assert out is not None
    out.type = TensorType(DType.FLOAT, shape)
    reader = graph.producer(first) if first is not value else back
    graph.replace_all_uses(value, out)
    assert reader is not None
    graph.set_input(reader, 0, value)  # replace_all_uses made it read its own output
