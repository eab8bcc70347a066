"""Where in the loop a failure happened (train / eval / sample / checkpoint / init): evidence-weighted inference."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from postmortem.verdict.sentences import clip
from postmortem.rules import facts

# Function/file words that place a frame in a phase. Checked innermost (most specific) first.
PHASE_WORDS = [
    ("checkpoint", re.compile(r"(?:^|_)(?:save|saving|checkpoint|ckpt|state_dict|consolidat|serializ|export)")),
    ("sample", re.compile(r"(?:^|_)(?:sampl|generat|infer|decode|log_images|log_validation_images|p_sample|ddim|denois)")),
    ("eval", re.compile(r"(?:^|_)(?:valid|val_|val$|eval|test|predict|score|metric|benchmark)")),
    ("train", re.compile(r"(?:^|_)(?:train|training_step|fit|backward|optimizer|optim_step|step$|forward_backward)")),
    ("init", re.compile(r"(?:^|_)(?:init_process_group|setup|build_model|load_model|from_pretrained|__init__$)")),
]
PERIOD_KEY = re.compile(r"(?P<what>sampl|generat|eval|valid|val_|test|checkpoint|ckpt|save)\w{0,64}?(?:_?(?:period|every|steps|interval|freq|frequency))")
BATCH_KEY = re.compile(r"(?P<what>sampl|generat|eval|valid|val|test|train|per_device_train)\w{0,64}?batch")
PHASE_OF_KEY = {"sampl": "sample", "generat": "sample", "eval": "eval", "valid": "eval", "val_": "eval", "val": "eval",
                "test": "eval", "checkpoint": "checkpoint", "ckpt": "checkpoint", "save": "checkpoint",
                "train": "train", "per_device_train": "train"}


@dataclass
class PhaseGuess:
    """A phase with the independent signals that support it."""
    phase: str = "unknown"
    signals: list[str] = field(default_factory=list)
    strength: float = 0.0      # 0..1: how directly the evidence shows the phase


def phase_from_frames(frames) -> tuple[str | None, str | None]:
    """Phase named by the innermost frame whose function (user code first) says it; and that frame's name."""
    frames = frames or []
    user = [f for f in frames if not facts.LIB_PATH.search(str(f.get("file", "")))]
    for group in (user, frames):
        for f in group:
            name = str(f.get("func", "")).lower()
            for phase, rx in PHASE_WORDS:
                if rx.search(name):
                    return phase, f.get("func")
    return None, None


def config_values(tables) -> dict[str, float]:
    """Config echoes (key -> last value seen)."""
    cfg = facts.ev(tables, "config")
    out: dict[str, float] = {}
    for attrs in cfg["details"]:
        if "key" in attrs and "value" in attrs:
            out[attrs["key"]] = attrs["value"]
    return out


def phase_from_periods(step: int | None, cfg: dict[str, float]) -> tuple[str | None, str | None]:
    """A phase whose period divides the step of death (step 2000 with sample_period 500 -> sample)."""
    if step is None or step <= 0:
        return None, None
    hits = []
    for key, value in cfg.items():
        m = PERIOD_KEY.search(key)
        if not m or value <= 1:
            continue
        period = int(value)
        if step % period == 0 or (step + 1) % period == 0:
            hits.append((PHASE_OF_KEY.get(m.group("what"), "unknown"), f"{key}={period} divides step {step}"))
    # A step where checkpointing and sampling coincide: the checkpoint was saved (it precedes), sampling follows.
    for preferred in ("sample", "eval", "checkpoint"):
        for phase, why in hits:
            if phase == preferred:
                return phase, why
    return None, None


def batch_ratio(cfg: dict[str, float]) -> tuple[str | None, str | None]:
    """A non-train phase whose batch size echo is larger than the train batch size."""
    train = [v for k, v in cfg.items() if BATCH_KEY.search(k) and PHASE_OF_KEY.get(BATCH_KEY.search(k).group("what")) == "train"]
    if not train:
        return None, None
    tb = max(train)
    for k, v in cfg.items():
        m = BATCH_KEY.search(k)
        if m and PHASE_OF_KEY.get(m.group("what")) in ("sample", "eval") and tb > 0 and v > tb:
            return PHASE_OF_KEY[m.group("what")], f"{k}={int(v)} is {v / tb:g}x the train batch ({int(tb)})"
    return None, None


def phase_from_context(tables, source: str, line: int, rank) -> tuple[str | None, str | None]:
    """The last phase marker (eval/sample start, checkpoint save, progress bar) before a line in the same file."""
    ev = tables.events
    marks = ev[(ev["source"] == source) & (ev["line"] <= line) &
               ev["kind"].isin(["eval_start", "sample_start", "checkpoint_save"])]
    st = tables.steps
    bars = st[(st["source"] == source) & (st["line"] <= line)]
    best = None
    if len(marks):
        m = marks.iloc[-1]
        phase = {"eval_start": "eval", "sample_start": "sample", "checkpoint_save": "checkpoint"}[m["kind"]]
        best = (int(m["line"]), phase, f"'{clip(str(m['message']), 80)}' (line {m['line']}) precedes it")
    if len(bars):
        b = bars.iloc[-1]
        if best is None or int(b["line"]) > best[0]:
            if b["phase"] in ("eval", "sample"):
                best = (int(b["line"]), b["phase"], f"progress bar '{b['desc']}' was running (line {b['line']})")
            elif b["phase"] == "train" and line - int(b["line"]) < 50:
                best = (int(b["line"]), "train", f"training progress at step {b['step']} (line {b['line']})")
    if best and line - best[0] > 400:
        return None, None
    return (best[1], best[2]) if best else (None, None)


# Words in the failing message (or the warning that carries it) that name what the process was doing. They are
# the names of the operations (PyTorch/HF APIs), not any one job's wording.
MESSAGE_PHASES = [
    ("checkpoint", re.compile(r"(?i)state_dict|clone\(\) tensor|save_(?:model|pretrained|checkpoint)|\bsaving\b|"
                              r"consolidat|full_state_dict|checkpoint(?:ing)? ")),
    ("init", re.compile(r"(?i)from_pretrained|loading checkpoint shards|load_state_dict|\bloading (?:the )?model")),
    ("sample", re.compile(r"(?i)\bgenerat(?:e|ing|ion)\b|\bsampl(?:e|ing)\b")),
    ("eval", re.compile(r"(?i)\bevaluat|\bvalidat|\bpredict(?:ion)?\b")),
]


def phase_from_message(text: str) -> tuple[str | None, str | None]:
    """A phase named by the failing message itself (`Failed to clone() tensor ... state_dict` -> checkpoint)."""
    for phase, rx in MESSAGE_PHASES:
        m = rx.search(text or "")
        if m:
            return phase, f"the message names {m.group(0).strip()!r}"
    return None, None


def after_training_end(tables, source: str, line: int) -> str | None:
    """The end-of-training marker that precedes a line in its file (what the framework prints when training is
    over), or None: what follows it is saving, evaluating or exporting, not training."""
    ev = tables.events
    ends = ev[(ev["kind"] == "end_marker") & (ev["source"] == source) & (ev["line"] < line)] if len(ev) else ev
    if ends.empty:
        return None
    e = ends.iloc[-1]
    return f"training had already ended ('{clip(str(e['message']), 60)}', line {e['line']})"


def infer_phase(tables, oom_row: pd.Series, tb_row: pd.Series | None, step: int | None,
                detail_attrs: dict | None = None) -> PhaseGuess:
    """Combine frames, the message, context markers, period arithmetic and batch echoes into a phase guess."""
    votes: dict[str, list[tuple[float, str]]] = {}

    def vote(phase, weight, why):
        if phase:
            votes.setdefault(phase, []).append((weight, why))

    if tb_row is not None:
        phase, func = phase_from_frames(tb_row["frames"])
        if phase:
            vote(phase, 0.9, f"the traceback passes through {func}()")
    phase, why = phase_from_message(str(oom_row["message"]))
    vote(phase, 0.8, why)
    ended = after_training_end(tables, oom_row["source"], int(oom_row["line"]))
    phase, why = phase_from_context(tables, oom_row["source"], int(oom_row["line"]), oom_row["rank"])
    if not (ended and phase == "train"):  # lines after the end marker are not training
        vote(phase, 0.7, why)
    if ended and not votes:
        vote("checkpoint", 0.45, ended + ": what runs then is the final save (or an evaluation)")
    elif ended:
        for p in list(votes):
            if p != "train":
                vote(p, 0.15, ended)
    cfg = config_values(tables)
    phase, why = phase_from_periods(step, cfg)
    vote(phase, 0.6, why)
    phase, why = batch_ratio(cfg)
    if phase and phase in votes:
        vote(phase, 0.3, why)
    elif phase:
        vote(phase, 0.25, why)
    if not votes:
        return PhaseGuess()
    scored = sorted(((min(1.0, sum(w for w, _ in v)), p) for p, v in votes.items()), reverse=True)
    strength, phase = scored[0]
    if len(scored) > 1 and scored[1][0] >= strength - 0.1:
        strength = max(0.2, strength - scored[1][0] / 2)   # conflicting evidence: be modest
    return PhaseGuess(phase, [why for _, why in votes[phase]], strength)
