"""bench/limits_bench.py: its smoke run works, and it stops the servers it
started on every exit path (a normal run, SIGTERM in the middle of a run).
Its servers are told apart from anything else on the machine as the child
processes of the bench's own process."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT

BENCH = os.path.join(ROOT, "bench", "limits_bench.py")
DEADLINE_S = 30


def children(pid: int):
    """The pids whose parent is `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def bench_dir(pid: int):
    """The working directory of `pid` if it is one bench.Server makes."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    return cwd if os.path.basename(cwd).startswith("slidewin-bench-") else None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, seconds=DEADLINE_S, what="condition"):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_smoke_run_reports_both_sides_and_the_same_decisions(tmp_path):
    out = tmp_path / "results.md"
    run = subprocess.run([sys.executable, BENCH, "--smoke", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert "### redis-7.0" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1,000 |") or line.startswith("| 10 |")]
    assert len(rows) == 8  # 2 limits x 4 phases
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        limits_us, slidewin_us, ratio = float(cells[4]), float(cells[5]), float(cells[6])
        assert limits_us > 0 and slidewin_us > 0
        assert abs(ratio - slidewin_us / limits_us) < 0.01
    assert "Summary" in text


def test_sigterm_mid_run_stops_its_server():
    # A run long enough to be interrupted in the middle of a phase.
    bench = subprocess.Popen([sys.executable, BENCH, "--servers", "redis-7.0", "--limits", "10,1000",
                              "--fill-hits", "200000", "--full-hits", "200000", "--rounds", "3"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        servers = []

        def started():
            # Its server runs in the temp dir it made (other children, such
            # as scripts/server-path.sh, come and go first).
            servers[:] = [p for p in children(bench.pid) if bench_dir(p)]
            return bool(servers) or bench.poll() is not None

        wait_until(started, what="the bench's server")
        assert bench.poll() is None, bench.stderr.read()
        cwd = bench_dir(servers[0])
        assert cwd
        time.sleep(1.5)  # into the fill phase
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=DEADLINE_S) != 0
        wait_until(lambda: not any(alive(p) for p in servers), seconds=15, what="the bench's server to stop")
        assert not os.path.exists(cwd)  # its temp dir removed
        assert "terminated" in bench.stderr.read()  # unwound by its handler, not killed
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(timeout=10)
        for p in servers:  # never leave one behind, even when failing
            if alive(p):
                os.kill(p, signal.SIGKILL)
