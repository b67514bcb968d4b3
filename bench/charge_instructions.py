#!/usr/bin/env python3
"""Instructions per call of charge commands (CHECK, CHECK ID, UNDO ID, SETTLE up/down) on keys of --sizes charges,
counted by callgrind inside call() (see instructions.py). Usage: bench/charge_instructions.py [--server redis-7.0] [--log-type compact] [--tag NAME]
"""
import argparse, glob, os, random, shutil, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Server  # noqa
from charges import Raw, resp  # noqa

ap = argparse.ArgumentParser()
ap.add_argument("--server", default="redis-7.0")
ap.add_argument("--log-type", default="compact")
ap.add_argument("--sizes", default="1000,100000")
ap.add_argument("--calls", type=int, default=50)
ap.add_argument("--out", default="/tmp/charge-instructions")
ap.add_argument("--tag", default="x")
o = ap.parse_args()
os.makedirs(o.out, exist_ok=True)
wrapper = ["valgrind", "--tool=callgrind", "--toggle-collect=call",
           "--callgrind-out-file=callgrind.out.%p", "--dump-instr=no",
           "--compress-strings=no", "--compress-pos=no"]  # each dump names its functions: callgrind_annotate reads it alone
srv = Server(o.server, wrapper=wrapper, timeout=120,
             module_args=["log-type", o.log_type, "max-limit", "10000000", "max-charges-per-key", str(1 << 24)])
pid = srv.proc.pid
W = 30 * 86_400_000
rng = random.Random(39)
raw = Raw(srv.port)
res = {}
def measure(name, packed):
    subprocess.run(["callgrind_control", "--zero", str(pid)], check=True, capture_output=True)
    lines = raw.run(b"".join(packed), len(packed))
    bad = [l for l in lines if l.startswith(b"-")]
    before = set(glob.glob(os.path.join(srv.dir, "callgrind.out.*")))
    subprocess.run(["callgrind_control", "--dump=" + name, str(pid)], check=True, capture_output=True)
    while True:
        new = set(glob.glob(os.path.join(srv.dir, "callgrind.out.*"))) - before
        if new:
            time.sleep(0.5); break
        time.sleep(0.1)
    path = max(new, key=os.path.getmtime)
    dest = os.path.join(o.out, f"{o.tag}-{o.log_type}-{name}.cg")
    shutil.copy(path, dest)
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                ir = int(line.split()[1]); break
    per = ir / len(packed)
    print(f"{o.tag} {o.log_type} {name}: {per:,.0f} Ir/call  replies[0]={lines[0]!r} errors={len(bad)} {bad[:1]}", flush=True)
    res[name] = per
try:
    for n in [int(s) for s in o.sizes.split(",")]:
        key = f"k{n}"
        ids = [rng.randbytes(16) for _ in range(n)]
        i = 0
        while i < n:
            part = ids[i:i + 2000]
            lines = raw.run(b"".join(resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x) for x in part), len(part))
            assert all(l == b":1" for l in lines), lines[:3]
            i += len(part)
        time.sleep(0.01)
        M = o.calls
        fresh = [rng.randbytes(16) for _ in range(M)]
        measure(f"{n}-check", [resp("SLIDEWIN.CHECK", key, 10_000_000, W) for _ in range(M)])
        measure(f"{n}-checkid", [resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x) for x in fresh])
        measure(f"{n}-undoid", [resp("SLIDEWIN.UNDO", key, "ID", x) for x in fresh])
        measure(f"{n}-settleup", [resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 2) for x in ids[:M]])
        measure(f"{n}-settledown", [resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 1) for x in ids[:M]])
finally:
    raw.close()
    srv.stop()
