from postmortem.cli import run

run()
