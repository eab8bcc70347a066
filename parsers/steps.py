"""Progress and step lines (FORMATS.md §9): tqdm bars, HF Trainer dicts, Megatron, Lightning, custom loops."""
from __future__ import annotations

import ast
import functools
import math
import re

import regex

from postmortem.parsers import framework_steps
from postmortem.parsers.formats import lower_for_literals

TQDM_RE = regex.compile(
    r"(?:(?P<desc>[^\r|]*?):? *)?(?P<pct>\d+)%\|(?P<bar>[^|]*)\| *(?P<n>\d+)/(?P<total>\d+|\?) "
    r"\[(?P<elapsed>[\d:]+|\?)<(?P<remaining>[\d:]+|\?),\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>[\w ]*?/s|s/[\w ]*?)(?:, (?P<postfix>[^\]]*))?\]")
_TQDM_GROUPS = tuple(TQDM_RE.groupindex[k] for k in ("desc", "n", "total", "postfix", "rate", "unit", "elapsed"))
HF_DICT_RE = regex.compile(r"^\{'(?:loss|eval_loss|train_runtime|train_loss|grad_norm|learning_rate|epoch)'.*\}\s*$")
GENERIC_STEP_RE = regex.compile(
    r"(?i)(?:^|[\s\[|,(])(?:global_step|step|iter(?:ation)?|it|batch)(?:\s*#)?\s*(?:[:=]\s*)?(?P<step>\d+)(?:\s*/\s*(?P<total>\d+))?\b")
LOSS_RE = regex.compile(
    r"(?i)\b(?:(?:train|total|lm|avg|mean|running)[ _]?)?loss(?:es)?\b['\"]?\s*(?:[:=]\s*)?['\"]?(?P<loss>-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))")
LR_RE = regex.compile(r"(?i)\b(?:lr|learning[ _]rate)\b['\"]?\s*(?:[:=]\s*)?['\"]?\[?(?P<lr>\d+\.?\d*(?:e[-+]?\d+)?)")
EPOCH_RE = regex.compile(r"(?i)\b(?:epoch|ep)\b\s*(?:[:=]\s*)?(?P<epoch>\d+(?:\.\d+)?)")
LOSS_ANY_RE = regex.compile(
    r"(?i)\b\w{0,64}loss\w{0,64}+\b['\"]?\s*(?:[:=]\s*)?['\"]?(?P<loss>-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))")
METRIC_PAIR_RE = regex.compile(r"(?i)\b[a-z][\w/.]{0,80}(?:\s*[:=])?\s+-?\d+\.\d+\b|\b[a-z][\w/.]{0,80}[:=]\s*-?\d")
STEP_FIRST_RE = regex.compile(r"(?i)^\W{0,4}(?:global_step|step|iter(?:ation)?|it|batch)\b")
# Other libraries' progress lines: tqdm without a total (`35batch [00:03, 10.5batch/s]`), mmengine/mmcv
# (`Epoch(train) [1][ 50/500]`, `Iter(val) [ 20/100]`), Keras (`50/500 [==>....] - ETA`), rich (`desc ━━━ 45/100`).
# (no description group: a lazy prefix before the count would be retried from every start of a long line; the
# description is the text before the match, cut in Python)
TQDM_NOTOTAL_RE = regex.compile(
    r"(?<![\w.])(?P<n>\d+)(?P<unit>[A-Za-z]\w*)? \[(?P<elapsed>[\d:]+), *(?P<rate>[\d.]+|\?) *"
    r"(?:\w+/s|s/\w+)(?:, [^\]]*)?\]")
MM_RE = regex.compile(r"\b(?P<kind>Epoch|Iter)\((?P<mode>train|val|test)\)\s*(?:\[(?P<epoch>\d+)\])?\s*"
                      r"\[\s*(?P<n>\d+)/(?P<total>\d+)\]")
KERAS_RE = regex.compile(r"^\s*(?P<n>\d+)/(?P<total>\d+) \[[=>.]+\]")
RICH_RE = regex.compile(r"━+\s+(?P<n>\d+)/(?P<total>\d+)\b")
BRACKET_FRACTION_RE = regex.compile(r"[(\[]\s*(?P<n>\d{1,9})\s*/\s*(?P<total>\d{1,9})\s*[)\]]")
EPOCH_BEFORE_RE = regex.compile(r"(?i)epoch\W*$|轮\W*$")
# `Epoch 0: 40/400 loss=...`: the batch within an epoch, printed without brackets or a bar
EPOCH_FRACTION_RE = regex.compile(r"(?i)\bepoch\s*(?P<epoch>\d{1,6})\s*[:,]?\s+(?P<n>\d{1,9})\s*/\s*(?P<total>\d{1,9})\b(?!\s*\])")

_EVAL_WORDS = regex.compile(r"(?i)\b(?:val(?:id(?:ation|ate|ating)?)?|eval(?:uat\w*)?|test(?:ing)?|predict\w*|sanity)\b")
_SAMPLE_WORDS = regex.compile(r"(?i)\b(?:sampl\w*|generat\w*|inference|infer)\b")
_PREP_WORDS = regex.compile(r"(?i)\b(?:tokeniz\w*|map|filter|preprocess\w*|loading|download\w*|prepar\w*|generating \w+ split|shuffl\w*|caching|"
                            r"computing checksums|extracting|resolving)\b")


@functools.lru_cache(maxsize=4096)  # descriptions repeat on every redraw of a bar
def phase_of(desc: str) -> str:
    """Which part of the loop a progress description names: train, eval, sample, or data (preparation)."""
    if not desc:
        return "train"
    if _PREP_WORDS.search(desc):
        return "data"
    if _EVAL_WORDS.search(desc):
        return "eval"
    if _SAMPLE_WORDS.search(desc):
        return "sample"
    return "train"


@functools.lru_cache(maxsize=4096)
def _epoch_of(desc: str) -> float | None:
    em = EPOCH_RE.search(desc)
    return _num(em.group("epoch")) if em else None


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


_STEP_WORDS = ("global_step", "step", "it", "batch")  # GENERIC_STEP_RE's keywords (iter, iteration start with it)
_STEP_SEPARATORS = "[|,("  # with the blanks (regex's \s is a subset of str.isspace)


def _generic_step_search(message: str):
    """GENERIC_STEP_RE.search(message), tried only where a match can begin: a keyword at the start of the text or
    after a separator (the match then starts at the separator). Leftmost such start that matches, as search finds."""
    low = lower_for_literals(message)
    if low is None:
        return GENERIC_STEP_RE.search(message)
    starts = set()
    for w in _STEP_WORDS:
        q = low.find(w)
        while q >= 0:
            if q == 0:
                starts.add(0)
            elif message[q - 1].isspace() or message[q - 1] in _STEP_SEPARATORS:
                starts.add(q - 1)
            q = low.find(w, q + 1)
    for p in sorted(starts):
        m = GENERIC_STEP_RE.match(message, p)
        if m:
            return m
    return None


def _may_have(text: str, word: str) -> bool:
    """False only when `text` lacks `word` (lowercase ASCII) in any case: a case-insensitive pattern that needs the
    word cannot match then."""
    lowered = lower_for_literals(text)
    return lowered is None or word in lowered


def _tqdm_search(message: str, max_bars: int = 8):
    """TQDM_RE.search without its quadratic cost on long lines: the lazy desc would rescan from every start, so
    anchor a match at the start of each `N%|` bar's description instead (same leftmost result)."""
    start = 0
    for _ in range(max_bars):
        i = message.find("%|", start)
        if i < 0:
            return None
        j = i
        while j > 0 and message[j - 1].isdigit():
            j -= 1
        if j < i:
            sep = max(message.rfind("|", 0, j), message.rfind("\r", 0, j)) + 1
            m = TQDM_RE.match(message, sep)
            if m:
                return m
        start = i + 2
    return None


# One `'key': value` of an HF log dict as the Trainer prints it: a number, None, a bool or a plain string.
_HF_NUMBER = r"-?(?:(?:\d+\.\d*|\.\d+|\d+)[eE][-+]?\d+|\d+\.\d*|\.\d+|0+|[1-9]\d*)(?![\w.])"
_HF_PAIR = re.compile(r"'([^'\\]*)': (" + _HF_NUMBER + r"|None|True|False|'[^'\\]*')(, |\}\s*$)")
_HF_CONST = {"None": None, "True": True, "False": False}


def _hf_value(tok: str):
    """What ast.literal_eval gives for one value token of _HF_PAIR."""
    if tok in _HF_CONST:
        return _HF_CONST[tok]
    if tok[0] == "'":
        return tok[1:-1]
    return int(tok) if tok.lstrip("-").isdigit() else float(tok)  # (an int token has no leading 0: _HF_NUMBER)


def _hf_dict(text: str) -> dict | None:
    """The dict an HF log line prints, as ast.literal_eval reads it (None when it is no literal). Flat dicts of
    numbers, the Trainer's every line, are read by one regex (a quarter of literal_eval's cost); anything else
    goes to literal_eval."""
    pos, out = 1, {}
    for m in _HF_PAIR.finditer(text, 1):
        if m.start() != pos:
            break
        out[m.group(1)] = _hf_value(m.group(2))
        pos = m.end()
        if m.group(3) != ", ":
            return out if pos == len(text) else None
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def clock_seconds(text: str | None) -> float | None:
    """tqdm's `MM:SS` or `H:MM:SS` (elapsed or remaining) in seconds; None for `?` or anything else."""
    if not text or text == "?" or len(text) > 12:
        return None
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        return None
    secs = 0
    for p in parts:
        secs = secs * 60 + int(p)
    return float(secs)


def parse_step(message: str) -> dict | None:
    """A steps row (without the common columns) for a progress/step line, or None."""
    if "%|" in message:
        m = _tqdm_search(message)
        if m:
            desc, n, total, post, rate, unit, elapsed = m.group(*_TQDM_GROUPS)  # by number: names are slow
            desc = (desc or "").strip()
            row = {"step": int(n), "total": int(total) if total.isdigit() else None,
                   "phase": phase_of(desc), "desc": desc[:120]}
            secs = clock_seconds(elapsed)
            if secs is not None:
                row["elapsed_s"] = secs
            post = post or ""
            lm = LOSS_RE.search(post) if _may_have(post, "loss") else None
            if lm:
                row["loss"] = _num(lm.group("loss"))
            # torchtune's description, gradient norms in the postfix
            row.update(framework_steps.bar_extras(message[:m.start("pct")], post, row.get("loss")))
            epoch = _epoch_of(desc)
            if epoch is not None:
                row["epoch"] = epoch
            unit = unit or ""
            if rate not in (None, "?"):
                rate_v = _num(rate)  # _num: the rate pattern also admits "1117.0.26"
                if unit.startswith("s/"):
                    row["step_time"] = rate_v
                elif (rate_v or 0) > 0 and unit.endswith("/s") and unit.startswith("it"):
                    row["step_time"] = 1.0 / rate_v
            return row
    fw = framework_steps.parse(message)  # Megatron/NeMo, DeepSpeed, fairseq
    if fw is not None:
        return fw
    other = _other_progress(message)
    if other is not None:
        return other
    if message.startswith("{'") and HF_DICT_RE.match(message):
        d = _hf_dict(message.replace("nan", "None").replace("inf", "None"))
        if d is None:  # no literal, or not a dict
            return None
        loss = d.get("loss", d.get("train_loss", d.get("eval_loss")))
        phase = "eval" if any(k.startswith("eval_") for k in d) else "train"
        row = {"step": None, "phase": phase, "desc": "hf-trainer-log",
               "loss": _num(str(loss)) if loss is not None else (float("nan") if "'loss': nan" in message else None),
               "lr": _num(str(d.get("learning_rate"))) if d.get("learning_rate") is not None else None,
               "epoch": _num(str(d.get("epoch"))) if d.get("epoch") is not None else None}
        row.update(framework_steps.extras(message))  # `'grad_norm': nan` reads as a non-finite reading
        if row["loss"] is not None and row["loss"] != row["loss"]:
            row["nan_iters"] = 1
        return row
    if "/" in message and ("loss" in message or "Loss" in message):
        # Any language: a bracketed fraction on a line that reports a loss (`[Rank 2] 处理批次 (5/32) loss=0.29`,
        # `Schritt [5/32] loss=...`); an epoch fraction is not a step.
        fm = BRACKET_FRACTION_RE.search(message)
        lm = LOSS_RE.search(message)
        if fm and lm and not EPOCH_BEFORE_RE.search(message[max(0, fm.start() - 12):fm.start()]):
            return {"step": int(fm.group("n")), "total": int(fm.group("total")), "phase": "train", "desc": "custom",
                    "loss": _num(lm.group("loss"))}
        em = EPOCH_FRACTION_RE.search(message) if lm else None
        if em and int(em.group("n")) <= int(em.group("total")):
            return {"step": int(em.group("n")), "total": int(em.group("total")), "phase": "train", "desc": "custom",
                    "loss": _num(lm.group("loss")), "epoch": _num(em.group("epoch"))}
    m = _generic_step_search(message)
    if m:
        lm = LOSS_RE.search(message) or LOSS_ANY_RE.search(message)
        lr = LR_RE.search(message)
        rest = message[m.end():]
        if not (lm or lr or m.group("total") or STEP_FIRST_RE.match(message) or METRIC_PAIR_RE.search(rest)):
            return None
        em = EPOCH_RE.search(message)
        loss = _num(lm.group("loss")) if lm else None
        row = {"step": int(m.group("step")), "total": int(m.group("total")) if m.group("total") else None,
               "phase": phase_of(message[: m.start()]) if _EVAL_WORDS.search(message[:40]) else "train",
               "desc": "custom", "loss": loss,
               "lr": _num(lr.group("lr")) if lr else None, "epoch": _num(em.group("epoch")) if em else None}
        row.update(framework_steps.extras(message))  # torchtune's `Step N | loss:x grad_norm:y`, custom loops
        if loss is not None and not math.isfinite(loss):
            row["nan_iters"] = 1
        return row
    return None


def _other_progress(message: str) -> dict | None:
    """A steps row for the progress lines of mmengine, Keras, rich and tqdm without a total, or None."""
    if "(" in message and ("Epoch(" in message or "Iter(" in message):
        m = MM_RE.search(message)
        if m:
            mode = m.group("mode")
            row = {"step": int(m.group("n")), "total": int(m.group("total")),
                   "phase": "train" if mode == "train" else "eval", "desc": f"{m.group('kind')}({mode})"}
            if m.group("epoch"):
                row["epoch"] = float(m.group("epoch"))
            lm = LOSS_RE.search(message[m.end():]) if _may_have(message, "loss") else None
            if lm:
                row["loss"] = _num(lm.group("loss"))
            return row
    if "[=" in message or "[." in message:
        m = KERAS_RE.match(message)
        if m:
            lm = LOSS_RE.search(message[m.end():]) if _may_have(message, "loss") else None
            return {"step": int(m.group("n")), "total": int(m.group("total")), "phase": "train", "desc": "keras",
                    "loss": _num(lm.group("loss")) if lm else None}
    if "━" in message:
        m = RICH_RE.search(message, message.find("━"))
        if m:
            desc = _desc_before(message, message.find("━"))
            return {"step": int(m.group("n")), "total": int(m.group("total")), "phase": phase_of(desc),
                    "desc": desc[:120]}
    if "/s]" in message or "s/" in message:
        m = TQDM_NOTOTAL_RE.search(message)
        if m and "%|" not in message:
            desc = _desc_before(message, m.start()).rstrip(":").strip()
            row = {"step": int(m.group("n")), "total": None, "phase": phase_of(desc), "desc": desc[:120]}
            epoch = _epoch_of(desc)
            if epoch is not None:
                row["epoch"] = epoch
            return row
    return None


def _desc_before(message: str, end: int) -> str:
    """A bar's description: the text before its counter, back to the previous redraw (`\\r`) or bar separator."""
    start = max(message.rfind("\r", 0, end), message.rfind("|", 0, end)) + 1
    return message[start:end].strip()[-120:]
