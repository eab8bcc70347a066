"""Waits for a signal: prints `ready`, then sleeps in waiting_for_godot(); on SIGTERM/SIGINT/SIGHUP it reports the
signal and exits 40 + signal number. With `selfkill SIG` it kills itself with that signal after `ready`."""
import os
import signal
import sys
import time


def on_signal(signum, _frame):
    print(f"job got {signal.Signals(signum).name}", flush=True)
    sys.exit(40 + signum)


def waiting_for_godot(seconds: float) -> None:
    time.sleep(seconds)


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, on_signal)
print(f"ready pid={os.getpid()}", flush=True)
if len(sys.argv) > 2 and sys.argv[1] == "selfkill":
    sig = getattr(signal, sys.argv[2])
    if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
waiting_for_godot(120)
print("nobody came", flush=True)
