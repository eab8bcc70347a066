"""Training frameworks' own progress lines as steps rows with what the numeric rules need: loss, learning rate, gradient
norm, loss scale and the skipped / non-finite iteration counters. The format strings are the frameworks' own:

- Megatron-LM (`megatron/training/training.py` training_log, printed by the last rank) and Megatron-DeepSpeed:
  `[ts] iteration {:8d}/{:8d} | consumed samples: ... | learning rate: {:.6E} | global batch size: ... | lm loss:
  {:.6E} | loss scale: {:.1f} | grad norm: {:.3f} | number of skipped iterations: {:3d} | number of nan iterations:
  {:3d} |`. A loss that is NaN or Inf is *left out* (`if avg >= 0.0`), and counted in `number of nan iterations`.
- NeMo 2's progress printer (`nemo/lightning/pytorch/callbacks/progress_printer.py`): `Training epoch {e}, iteration
  {n}/{total} | lr: ... | global_step: ... | reduced_train_loss: ... | train_step_timing in s: ...`.
- DeepSpeed's engine report (`runtime/engine.py`, rank 0 through log_dist): `[Rank 0] step={n}, skipped={m}, lr=[...],
  mom=[...]` (`skipped` counts overflow-skipped steps since the start); the pipeline engine's `steps: {n} loss:
  {x:0.4f} iter time (s): ... samples/sec: ...`.
- fairseq (`fairseq/logging/progress_bar.py`): the simple bar `epoch {:03d}:  {:5d} / {:d} loss=..., nll_loss=...,
  num_updates=..., lr=..., gnorm=..., loss_scale=..., ...` (before 0.9 with a leading `| `), the epoch summary
  `epoch {:03d} | loss 1.2 | ... | num_updates 3726 | lr ... | gnorm ...` and the JSON bar's `{"epoch": 1, ...}`.
- torchtune's recipes: the progress bar's description `{epoch}|{global_step}|Loss: {loss}` (parsers.steps reads the
  bar) and its stdout metric logger `Step {step} | loss:{x} lr:{y} grad_norm:{z} ...`; HF Trainer (and trl, which
  logs through it) dicts `{'loss': ..., 'grad_norm': ..., 'learning_rate': ...}`; Lightning's bar postfix.

`nan_iters` is the number of iterations with a non-finite loss or gradient norm that the line reports: Megatron's
counter, else 1 where the line prints its loss or gradient norm as nan/inf.
"""
from __future__ import annotations

import json
import math
import re

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
_MEGATRON = re.compile(r"\biteration\s{0,20}(?P<step>\d{1,12})\s{0,4}/\s{0,20}(?P<total>\d{1,12})\s{0,4}\|(?P<rest>.*)")
_NEMO_EPOCH = re.compile(r"\bepoch (?P<epoch>\d{1,9}),\s*$")
# (no leading \s*: finditer starts at the key's letter; the blanks around ':' are bounded, so a long run of blanks
# costs a linear scan, not one attempt per split of the run)
_FIELD = re.compile(r"(?P<key>[A-Za-z][\w /().-]{0,80}?)[ \t]{0,32}:[ \t]{0,32}(?P<val>" + _NUM + r")\s*(?:\||$)", re.I)
_DS_REPORT = re.compile(r"\bstep=(?P<step>\d{1,12}), skipped=(?P<skipped>\d{1,12}), lr=\[(?P<lr>[^\],]{0,40})")
_DS_PIPE = re.compile(r"\bsteps: (?P<step>\d{1,12}) loss: (?P<loss>" + _NUM + r") ", re.I)
_FAIRSEQ_BAR = re.compile(r"(?:^|\|\s)epoch (?P<epoch>\d{1,6}):\s{0,20}(?P<n>\d{1,12}) / (?P<total>\d{1,12}) (?P<rest>.*)$")
_FAIRSEQ_SUMMARY = re.compile(r"(?:^|\|\s)epoch (?P<epoch>\d{1,6}) \| (?P<rest>.*\bnum_updates \d.*)$")
_COMMA_KV = re.compile(r"(?:^|,\s)(?P<key>[\w/.-]{1,60})=(?P<val>[^,\s]{1,40})")
_PIPE_KV = re.compile(r"(?:^|\|\s)(?P<key>[\w/.-]{1,60}) (?P<val>[^|\s]{1,40})")
# a gradient norm or loss scale printed by any loop (`grad_norm=1.2`, `'grad_norm': 1.2`, `grad_norm:0.8`, `gnorm 1.2`)
_GRAD_NORM = re.compile(r"(?i)(?:^|[\s,{|'\"(])(?:grad[_ ]norm|gnorm|total_norm)['\"]?\s*(?:[:=]\s*)?['\"]?(?P<v>" + _NUM + r")\b")
_TORCHTUNE_DESC = re.compile(r"(?:^|[\s\r])(?P<epoch>\d{1,6})\|(?P<step>\d{1,12})\|Loss: (?P<loss>" + _NUM + r")")
_LOSS_SCALE = re.compile(r"(?i)(?:^|[\s,{|'\"(])loss[_ ]scale['\"]?\s*[:=]\s*['\"]?(?P<v>" + _NUM + r")\b")


def _num(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _int(text) -> int | None:
    v = _num(text)
    return int(v) if v is not None and math.isfinite(v) else None


def _bad(v: float | None) -> bool:
    return v is not None and not math.isfinite(v)


def parse(message: str) -> dict | None:
    """A steps row (without the common columns) for a training framework's own progress line, or None."""
    if "iteration" in message:
        row = _megatron(message)
        if row is not None:
            return row
    if "step" in message:
        m = _DS_REPORT.search(message)
        if m:
            return {"step": int(m.group("step")), "phase": "train", "desc": "deepspeed",
                    "skipped": int(m.group("skipped")), "lr": _num(m.group("lr").strip())}
        m = _DS_PIPE.search(message) if "steps: " in message else None
        if m:
            loss = _num(m.group("loss"))
            return {"step": int(m.group("step")), "phase": "train", "desc": "deepspeed", "loss": loss,
                    "nan_iters": 1 if _bad(loss) else None}
    if "epoch " in message and ("=" in message or "num_updates" in message):
        return _fairseq(message)
    if message.startswith('{"') and "num_updates" in message:
        return _fairseq_json(message)
    return None


def _megatron(message: str) -> dict | None:
    """Megatron-LM / Megatron-DeepSpeed interval lines and NeMo 2's progress printer."""
    m = _MEGATRON.search(message)
    if not m:
        return None
    fields: dict[str, float | None] = {}
    for f in _FIELD.finditer(m.group("rest")):
        fields.setdefault(f.group("key").strip().lower(), _num(f.group("val")))
    before = message[:m.start()]
    nemo = _NEMO_EPOCH.search(before)
    losses = [k for k in fields if k.endswith("loss") and "scale" not in k]
    key = "lm loss" if "lm loss" in fields else ("reduced_train_loss" if "reduced_train_loss" in fields else
                                                 (losses[0] if losses else None))
    loss = fields.get(key) if key else None
    gnorm = fields.get("grad norm")
    nan = fields.get("number of nan iterations")
    row = {"step": int(m.group("step")), "total": int(m.group("total")),
           "phase": "eval" if re.search(r"(?i)validat|testing|sanity", before) else "train",
           "desc": "nemo" if nemo or "global_step" in fields else "megatron", "loss": loss,
           "lr": fields.get("learning rate", fields.get("lr")), "grad_norm": gnorm,
           "loss_scale": fields.get("loss scale"),
           "skipped": _int(fields.get("number of skipped iterations")),
           "nan_iters": _int(nan) if nan is not None else (1 if _bad(loss) or _bad(gnorm) else None)}
    ms = fields.get("elapsed time per iteration (ms)")
    s = fields.get("elapsed time per iteration (s)", fields.get("train_step_timing in s"))
    row["step_time"] = ms / 1000 if ms is not None else s
    if nemo:
        row["epoch"] = float(nemo.group("epoch"))
    return row


def _fairseq(message: str) -> dict | None:
    """fairseq's simple bar (`epoch 001:  100 / 1000 loss=...`) and epoch summary (`epoch 001 | loss 1.2 | ...`)."""
    m = _FAIRSEQ_BAR.search(message.strip())
    if m:
        kv = {k.group("key"): k.group("val") for k in _COMMA_KV.finditer(m.group("rest"))}
        if not kv:
            return None
        updates = _int(kv.get("num_updates"))
        row = {"step": updates if updates is not None else int(m.group("n")),
               "total": None if updates is not None else int(m.group("total")), "phase": "train"}
    else:
        m = _FAIRSEQ_SUMMARY.search(message.strip())
        if not m:
            return None
        kv = {k.group("key"): k.group("val") for k in _PIPE_KV.finditer(m.group("rest"))}
        if "num_updates" not in kv:
            return None
        row = {"step": _int(kv["num_updates"]), "total": None,
               "phase": "eval" if "valid on" in m.group("rest") or "valid_loss" in kv else "train"}
    return _fairseq_row(row, kv, float(m.group("epoch")))


def _fairseq_json(message: str) -> dict | None:
    try:
        d = json.loads(message)
    except (ValueError, RecursionError):
        return None
    if not isinstance(d, dict):
        return None
    kv = {str(k): str(v) for k, v in d.items()}
    row = {"step": _int(kv.get("num_updates")), "total": None,
           "phase": "eval" if any(k.startswith("valid_") for k in kv) else "train"}
    return _fairseq_row(row, kv, _num(kv.get("epoch")))


def _fairseq_row(row: dict, kv: dict, epoch: float | None) -> dict:
    loss = _num(kv.get("loss", kv.get("valid_loss")))
    gnorm = _num(kv.get("gnorm"))
    row.update({"desc": "fairseq", "epoch": epoch, "loss": loss, "lr": _num(kv.get("lr")), "grad_norm": gnorm,
                "loss_scale": _num(kv.get("loss_scale")), "nan_iters": 1 if _bad(loss) or _bad(gnorm) else None})
    return row


def extras(text: str) -> dict:
    """Gradient norm and loss scale that a progress line prints beside its loss (a bar's postfix, an HF dict, a
    custom loop's key/values), with nan_iters 1 where its loss or gradient norm is non-finite."""
    out: dict = {}
    low = text.lower()
    if "norm" in low:
        m = _GRAD_NORM.search(text)
        if m:
            out["grad_norm"] = _num(m.group("v"))
    if "scale" in low:
        m = _LOSS_SCALE.search(text)
        if m:
            out["loss_scale"] = _num(m.group("v"))
    if _bad(out.get("grad_norm")):
        out["nan_iters"] = 1
    return out


def bar_extras(before: str, post: str, loss: float | None = None) -> dict:
    """What a progress bar says beyond its count: torchtune's description `{epoch}|{global_step}|Loss: {x}` (its
    epoch and loss), a gradient norm or loss scale in the postfix, nan_iters 1 where a loss or norm is non-finite."""
    out: dict = {}
    if "|Loss: " in before:
        m = _TORCHTUNE_DESC.search(before[-300:])
        if m:
            out["epoch"] = float(m.group("epoch"))
            if loss is None:
                loss = out["loss"] = _num(m.group("loss"))
            out["desc"] = "torchtune"
    if post:
        out.update(extras(post))
    if _bad(loss):
        out["nan_iters"] = 1
    return out
