"""Environment variables that make a job leave evidence, added only where the user has not set them."""
from __future__ import annotations

import os
import re

FR_BUFFER_ENTRIES = "2000"   # flight-recorder ring size: the last 2000 collectives per rank (a few MB at most)
FR_RENAMED_IN = (2, 8)       # torch from here reads TORCH_FR_* and warns about each TORCH_NCCL_* alias it finds
_UNKNOWN = object()


def installed_torch_version() -> tuple[int, int] | None:
    """(major, minor) of the torch installed beside postmortem, from package metadata (torch is never imported)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        text = version("torch")
    except (ImportError, PackageNotFoundError, ValueError):
        return None
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


# torchrun options that decide where its workers' output goes; given on the command line they beat PET_* variables, so
# a user who chose one gets nothing added (a flag of the training script that looks the same only costs the tee).
_TORCHRUN_OUTPUT_FLAG = re.compile(r"^(?:--tee|--redirects|-t|-r)(?:=|\d|$)")
# torchrun's console prefix for tee'd lines, with the global rank (its default `[default3]:` names the local rank,
# which repeats on every node). `${rank}` is expanded by torchrun (string.Template), never by a shell.
RANK_PREFIX_TEMPLATE = "[rank${rank}]:"


def chooses_torchrun_output(command) -> bool:
    """True when the command line sets torchrun's --tee or --redirects itself."""
    return any(_TORCHRUN_OUTPUT_FLAG.match(str(a)) for a in command or ())


def evidence_env(environ: dict[str, str], node_dir: str,
                 torch_version=_UNKNOWN, command=None) -> tuple[dict[str, str], dict[str, str]]:
    """Return (the job's environment, the variables added); a variable the user set, even to '', is never changed.

    Aliases are one setting: when the user set either name of a pair, neither is added (so an explicit
    TORCH_NCCL_TRACE_BUFFER_SIZE=0 is not overridden by a newer TORCH_FR_BUFFER_SIZE). Of a pair only the name the
    installed torch reads is added (both when torch's version is unknown), since torch warns about the old name.
    """
    env = dict(environ)
    added: dict[str, str] = {}
    tv = installed_torch_version() if torch_version is _UNKNOWN else torch_version

    def add(names: tuple[str, ...], value: str) -> bool:
        if any(n in env for n in names):
            return False
        if len(names) == 2 and tv is not None:
            names = names[:1] if tuple(tv) >= FR_RENAMED_IN else names[1:]
        for n in names:
            env[n] = added[n] = value
        return True

    # NCCL_DEBUG_FILE only when we chose the level too: a user who set NCCL_DEBUG expects it on the console.
    if add(("NCCL_DEBUG",), "INFO"):
        add(("NCCL_DEBUG_FILE",), os.path.join(node_dir, "nccl", "nccl.%h.%p.log"))
    add(("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"), FR_BUFFER_ENTRIES)
    add(("TORCH_NCCL_DUMP_ON_TIMEOUT",), "1")
    # torch appends the global rank: flight_recorder/nccl_trace_rank_<N> (the analyzer reads the rank from the name).
    add(("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
        os.path.join(node_dir, "flight_recorder", "nccl_trace_rank_"))
    add(("TORCHELASTIC_ERROR_FILE",), os.path.join(node_dir, "error.json"))
    # torchrun reads --log-dir from PET_LOG_DIR: each worker's error.json then lands in DIR (console unchanged).
    add(("PET_LOG_DIR",), os.path.join(node_dir, "torchrun"))
    # Every worker's stdout/stderr teed by torchrun: a file per rank in the log dir, and on the console each line
    # prefixed with its global rank, so that `step 12 loss 0.3` printed by any rank says which rank printed it.
    # Left alone when the user chose how torchrun handles output (PET_TEE / PET_REDIRECTS or the flags).
    if "PET_REDIRECTS" not in env and not chooses_torchrun_output(command):
        if add(("PET_TEE",), "3"):
            add(("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",), RANK_PREFIX_TEMPLATE)
    add(("PYTHONFAULTHANDLER",), "1")
    # Through a pipe Python block-buffers stdout: a hung rank's last lines would sit in its buffer, unseen.
    add(("PYTHONUNBUFFERED",), "1")
    return env, added


def evidence_dirs(node_dir: str) -> list[str]:
    """Directories the added variables point into (created before the job starts)."""
    return [os.path.join(node_dir, d) for d in ("nccl", "flight_recorder", "torchrun")]
