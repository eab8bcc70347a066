"""Stack analysis over the `stacks` table, by concern: frame normalisation (`frames`), what a stack is doing
(`classify`), and main-thread selection / merging across ranks (`merge`). The public names are re-exported here."""
from __future__ import annotations

from postmortem.stacks.classify import (CLASSES, blocking_frame, classify_frames, frame_class, is_launcher,
                                        last_user_frame, waits_inside_backward, in_training_step,
                                        classify_thread)
from postmortem.stacks.frames import MAX_FRAMES, bare_name, cap_frames, is_native, short_file, signature
from postmortem.stacks.merge import (MergedStacks, StackClass, StackNode, join_ranks, main_thread_rows, merge_stacks,
                                     rank_ranges)

__all__ = ["CLASSES", "MAX_FRAMES", "MergedStacks", "StackClass", "StackNode", "bare_name", "blocking_frame",
           "cap_frames", "classify_frames", "frame_class", "is_launcher", "is_native", "join_ranks",
           "last_user_frame", "main_thread_rows", "merge_stacks", "rank_ranges", "short_file", "signature",
           "waits_inside_backward", "in_training_step", "classify_thread"]
