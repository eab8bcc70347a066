"""Write `postmortem analyze X --format json` for every sample, shared case and lab case into OUT (one file each):
usage: python benchmarks/dump_json.py SRC OUT [JOBS]; compare two such folders with diff -r (the `input` line
spells the path relative to SRC)."""
import os, subprocess, sys, concurrent.futures as cf
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
S = "/work/shared"
inputs = []
for d in sorted(os.listdir(f"{src}/samples")):
    p = f"{src}/samples/{d}"
    if os.path.isdir(p):
        inputs.append(("sample__" + d, p + "/logs" if os.path.isdir(p + "/logs") else p))
for setname in ("corpus", "realruns", "flight-recorder", "seed-cases"):
    for d in sorted(os.listdir(f"{S}/{setname}")):
        if os.path.isdir(f"{S}/{setname}/{d}"):
            inputs.append((f"{setname}__{d}", f"{S}/{setname}/{d}"))
for d in sorted(os.listdir(f"{src}/benchmarks/lab/cases")):
    inputs.append(("lab__" + d, f"{src}/benchmarks/lab/cases/{d}"))
def one(item):
    name, path = item
    env = dict(os.environ, PYTHONPATH=src)
    # the input path is printed in the JSON: give every tree the same relative spelling
    rel = os.path.relpath(path, src)
    r = subprocess.run([sys.executable, "-m", "postmortem", "analyze", rel, "--format", "json"], cwd=src,
                       capture_output=True, env=env)
    open(f"{out}/{name}.json", "wb").write(r.stdout + b"\n--rc %d\n" % r.returncode)
with cf.ThreadPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 else 2) as ex:
    list(ex.map(one, inputs))
print(len(inputs), "inputs")
