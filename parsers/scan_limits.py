"""The prefilter's budgets, sizes and line flags (parsers/prefilter.py). Read as `limits.NAME` where a test or a
benchmark may change them at run time."""
from __future__ import annotations

import re

# The exact budget: this much of a job's text is read line by line in all, every line that can yield a row handed
# over as a line reader would (every progress, step and NCCL line); the rest of every file is summarised. It is
# shared by the job's files (exact_shares): a job of a few small logs is read exactly, one of thousands of ranks is
# summarised whatever the size of its files, and what is kept exactly costs a fixed amount of time and memory.
EXACT_JOB_BYTES = 512 * 1024
CHUNK = 1 << 20
SHORT_SPAN = 16 * 1024      # spans shorter than this have their newlines counted by bytes.count
LONG_LINE = 8 << 20           # a line with neither `\n` nor `\r` is cut after this many bytes
KEY_MEMO_MAX = 4096           # keys longer than this are not memoised
HEAD_BYTES = 128 * 1024       # head_lines splits this much in C when the lines it wants lie within
SPAN_MIN = 64 * 1024          # lines longer than this are not copied out of their block (see _Span)
MEMO_CAP = 200_000            # memo entries per process before it is cleared
MAX_SAMPLES = 16              # sampled progress / step lines per file (plus the exact last ones)
MIN_STRIDE = 8 * 1024
ERROR_CAP = 64                # error lines of one shape and rank handed over per big file (then: the latest)
INFO_CAP = 4                  # informational event lines of one shape handed over per big file (then: the latest)
SCAN_BLOCKS = True            # big files: whole-block Hyperscan scanning (False: every line judged on its own)
TAIL_BYTES = 64 * 1024        # the end of every file kept for its last lines (postmortem.ranks.odd_lines)
SEGMENT_LEVEL = 8             # an event line with more `\r` segments than this is handed over segment by segment

F_EVENT, F_BAR, F_STEP, F_WEAK = 1, 2, 4, 8
F_NCCL_CHANNEL, F_NCCL_RING, F_NCCL_TREES, F_NCCL_OTHER = 16, 32, 64, 128
F_NCCL = F_NCCL_CHANNEL | F_NCCL_RING | F_NCCL_TREES | F_NCCL_OTHER
F_WINDOW = 256
F_ERRLINE = 1024  # an event trigger of an error-level format: the last progress line before it is handed over too
F_EXCWORD = 512  # only a weak trigger (`Warning`): a line that matters only inside an open traceback
F_GATED = 2048  # an event only by the triggers of `scan: regex` formats: an event where one of their regexes matches
_EVENT_BITS = F_EVENT | F_GATED | F_ERRLINE | F_WINDOW
FRAME_REACH = 62  # lines after a traceback frame where a weak-trigger line can still close it (textlog.MAX_OPEN_GAP)
RESOLVE_REACH = 1 << 20  # bytes before an error line (or the end) searched for the last progress/step line
STRIDE_WALK = 16   # lines looked at after a stride mark for a progress/step line to sample
REGION_WALK = 64   # lines walked back from the end of a skipped region for its last step line
CONFIG_HEAD = 64 * 1024      # bytes at a big file's start where every case-insensitive config word is reported
NCCL_COUNT_HEAD = 64 * 1024   # block mode counts NCCL INFO lines in the first this many bytes of a file
NCCL_COUNT_NEEDLES = ((0, b"NCCL INFO Channel"), (1, b"NCCL INFO Ring"), (2, b"NCCL INFO Tree"))
NCCL_KINDS = ((F_NCCL_CHANNEL, "channel"), (F_NCCL_RING, "ring"), (F_NCCL_TREES, "trees"), (F_NCCL_OTHER, "other"))

# Bytes that vary between lines of one shape: digits, blanks, tqdm's ascii and unicode bar glyphs (U+2588-U+258F).
DELETE = b"0123456789 \t#" + bytes([0xE2, 0x96]) + bytes(range(0x88, 0x90))
_RANK_DIGITS_RE = re.compile(rb"(?i)rank\D{0,3}(\d+)")  # the rank a repeated error line names (part of its cap key)
ANSI_BYTES_RE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\n]*\x07|\x1b[()][AB012]")
# NCCL INFO lines that state facts the tables need (rank map, world size, version, transport, error trails).
NCCL_FACTS = ["Init COMPLETE", "Init START", "nRanks", "NCCL version", "Using network", " : Using "]
NCCL_TRAIL_KEY_RE = re.compile(rb"NCCLINFO[\w/-]{1,256}\.(?:cc|cu|cpp|c|h):->")  # a source path: bounded
# The raw form for Hyperscan leaves out the `NCCL INFO` part (on half the lines of an NCCL_DEBUG=INFO log, it
# halves the scan speed); the shape key check (NCCL_TRAIL_KEY_RE) then asks for it.
NCCL_TRAIL_RAW = rb"(?:\.cc|\.cu|\.cpp|\.c|\.h):[0-9]*[ \t]*->"
