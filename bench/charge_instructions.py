#!/usr/bin/env python3
"""Instructions per call of charge commands (CHECK, CHECK ID, UNDO ID, SETTLE up/down) on keys of --sizes charges,
counted by callgrind inside call() (see instructions.py). Usage: bench/charge_instructions.py [--server redis-7.0] [--log-type compact] [--tag NAME]

Each key: first a tail of 3 * --calls + 10 charges, one every --gap ms (the
client's clock read before and after each), then the rest pipelined. Measured,
--calls calls each: CHECK, CHECK+ID (fresh ids), UNDO ID of those (the newest
charges), SLIDEWIN.APPLY key CUT id 0 of another fresh batch (what a replica
applies for UNDO ID), UNDO ID of charges from the middle of the key (`undoold`),
SETTLE +1/-1 of the oldest; then the trim cases, where one tail charge leaves
the window a call: SLIDEWIN.APPLY key TRIM <after tail charge i> CHARGE ... (a
replica's expiring CHECK+ID, `applyexpire`), then CHECK+ID and CHECK, one call
at a time, each sent once the server's cutoff has passed the next tail charge
(`checkidexp`, `checkexp`; the charges that left the window are printed).
SLIDEWIN_MODULE / CARGO_TARGET_DIR say which build is loaded (printed).
"""
import argparse, glob, os, random, shutil, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import MODULE, Server  # noqa
from charges import Raw, resp  # noqa

ap = argparse.ArgumentParser()
ap.add_argument("--server", default="redis-7.0")
ap.add_argument("--log-type", default="compact")
ap.add_argument("--sizes", default="1000,100000")
ap.add_argument("--calls", type=int, default=50)
ap.add_argument("--out", default="/tmp/charge-instructions")
ap.add_argument("--tag", default="x")
ap.add_argument("--gap", type=int, default=8, help="ms between the tail's charges (a call must take less under callgrind)")
ap.add_argument("--only", default="", help="comma-separated case names to measure (default: all)")
o = ap.parse_args()
os.makedirs(o.out, exist_ok=True)
wrapper = ["valgrind", "--tool=callgrind", "--toggle-collect=call",
           "--callgrind-out-file=callgrind.out.%p", "--dump-instr=no",
           "--compress-strings=no", "--compress-pos=no"]  # each dump names its functions: callgrind_annotate reads it alone
srv = Server(o.server, wrapper=wrapper, timeout=120,
             module_args=["log-type", o.log_type, "max-limit", "10000000", "max-charges-per-key", str(1 << 24)])
pid = srv.proc.pid
print(f"module {MODULE} (built {time.ctime(os.path.getmtime(MODULE))})", flush=True)
W = 30 * 86_400_000
rng = random.Random(39)
raw = Raw(srv.port)
res = {}
def now_ms():
    return time.time_ns() // 1_000_000
def wanted(name):
    return not o.only or name.split("-", 1)[1] in o.only.split(",")
def measure(name, packed, pace=None):
    """Runs the packed calls (pipelined; one at a time after pace(j) when given)."""
    if not wanted(name):
        return
    subprocess.run(["callgrind_control", "--zero", str(pid)], check=True, capture_output=True)
    if pace is None:
        lines = raw.run(b"".join(packed), len(packed))
    else:
        lines = []
        for j, p in enumerate(packed):
            pace(j)
            lines += raw.run(p, 1)
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
        M = o.calls
        T = min(n, 3 * M + 10)
        after = []  # client ms after each tail charge's reply (the charge scored at or before it)
        for x in ids[:T]:
            last = after[-1] if after else 0
            while now_ms() < last + o.gap:
                time.sleep(0.0005)
            line = raw.run(resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x), 1)[0]
            assert line == b":1", line
            after.append(now_ms())
        i = T
        while i < n:
            part = ids[i:i + 2000]
            lines = raw.run(b"".join(resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x) for x in part), len(part))
            assert all(l == b":1" for l in lines), lines[:3]
            i += len(part)
        time.sleep(0.01)
        fresh = [rng.randbytes(16) for _ in range(M)]
        fresh2 = [rng.randbytes(16) for _ in range(M)]
        measure(f"{n}-check", [resp("SLIDEWIN.CHECK", key, 10_000_000, W) for _ in range(M)])
        measure(f"{n}-checkid", [resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x) for x in fresh])
        measure(f"{n}-undoid", [resp("SLIDEWIN.UNDO", key, "ID", x) for x in fresh])
        if wanted(f"{n}-applycut"):
            lines = raw.run(b"".join(resp("SLIDEWIN.CHECK", key, 10_000_000, W, "ID", x) for x in fresh2), M)
            assert all(l == b":1" for l in lines), lines[:3]
        measure(f"{n}-applycut", [resp("SLIDEWIN.APPLY", key, "CUT", x, 0) for x in fresh2])
        mid = T + (n - T) // 2
        if n - T >= 2 * M:
            measure(f"{n}-undoold", [resp("SLIDEWIN.UNDO", key, "ID", x) for x in ids[mid:mid + M]])
        measure(f"{n}-settleup", [resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 2) for x in ids[:M]])
        measure(f"{n}-settledown", [resp("SLIDEWIN.SETTLE", key, "ID", x, "COST", 1) for x in ids[:M]])
        if T < 3 * M + 10:
            continue
        def count():
            reply = srv.r.execute_command("SLIDEWIN.PEEK", key, 10_000_000, W)
            return 10_000_000 - int(reply[2])
        # A replica's expiring CHECK+ID: tail charge i leaves, a charge comes,
        # under members above every other as a master gives them (a CHECK
        # without ID takes the member after the newest entry's, which may
        # be below ids given back: not this).
        reply = srv.r.execute_command("SLIDEWIN.CHECK", key, 10_000_000, W, "WITHMEMBERS")
        top, score = (int(v) for v in reply[-1][0].split("@"))
        top = max(top, 1 << 40)
        c0 = count()
        measure(f"{n}-applyexpire", [resp("SLIDEWIN.APPLY", key, "TRIM", after[j], "CHARGE", rng.randbytes(16), score,
                                         top + 1 + j, 1) for j in range(M)])
        if wanted(f"{n}-applyexpire"):
            print(f"  applyexpire: {c0 + M - count()} charges left the window in {M} calls", flush=True)
        # The master's: each call sent once now - wx has passed the next
        # tail charge (wx set when the phase starts: the cutoff just after
        # tail charge base - 1).
        def pace_from(base, wx):
            def pace(j):
                while now_ms() - wx <= after[base + j]:
                    time.sleep(0.0002)
            return pace
        c0 = count()
        wx = now_ms() - after[M - 1]
        measure(f"{n}-checkidexp", [resp("SLIDEWIN.CHECK", key, 10_000_000, wx, "ID", rng.randbytes(16)) for _ in range(M)],
                pace=pace_from(M, wx))
        if wanted(f"{n}-checkidexp"):
            print(f"  checkidexp: {c0 + M - count()} charges left the window in {M} calls", flush=True)
        c0 = count()
        wx = now_ms() - after[2 * M - 1]
        measure(f"{n}-checkexp", [resp("SLIDEWIN.CHECK", key, 10_000_000, wx) for _ in range(M)], pace=pace_from(2 * M, wx))
        if wanted(f"{n}-checkexp"):
            print(f"  checkexp: {c0 + M - count()} entries left the window in {M} calls", flush=True)
finally:
    raw.close()
    srv.stop()
