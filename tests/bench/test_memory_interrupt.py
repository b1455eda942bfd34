"""`r2ac bench memory` stopped by SIGTERM: its worker processes stop with it (none left running), finished
runs are kept, and the same command again starts the interrupted run over and runs the rest."""

import csv
import json
import os
import signal
import subprocess
import sys

from procs import sigterm_when

from r2ac.bench.memory import main, run_is_done

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = ["--tasks", "cue-vector", "--spans", "3", "--methods", "rtrl", "--seeds", "0,1", "--jobs", "1",
        "env.num_envs=8", "learner.batch_size=8", "model.hidden_size=8", "logger.log_interval_s=0.2"]


def _children(pid: int):
    """The pool's worker processes (not multiprocessing's resource tracker, which exits on its own)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    pids = [int(p) for p in out.split()]
    return [p for p in pids if b"resource_tracker" not in open(f"/proc/{p}/cmdline", "rb").read()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split(")")[-1].split()[0] != "Z"


def test_run_is_done_only_for_a_run_that_was_not_interrupted(tmp_path):
    assert not run_is_done(str(tmp_path))  # no summary
    for status, done in [("finished", True), ("stopped: time limit", True), ("interrupted", False)]:
        (tmp_path / "summary.json").write_text(json.dumps({"status": status}))
        assert run_is_done(str(tmp_path)) is done


def test_sigterm_stops_the_bench_and_its_workers_and_the_rerun_completes(tmp_path, capsys):
    out = tmp_path / "bm"
    run0 = out / "runs" / "cue-vector-3-rtrl-s0"
    proc = subprocess.Popen([sys.executable, "-m", "r2ac.bench.memory", *ARGS, "--minutes", "10", "--out", str(out)],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    workers = []
    try:
        err = sigterm_when(
            proc, lambda: (run0 / "metrics.csv").exists() and len((run0 / "metrics.csv").read_text().splitlines()) >= 3,
            what="metrics from the first run", before=lambda: workers.extend(_children(proc.pid)) or None)
        assert workers
    finally:
        alive = [w for w in workers if _alive(w)]
        for pid in ([proc.pid] if proc.poll() is None else []) + alive:
            os.kill(pid, signal.SIGKILL)  # a failed test leaves nothing training
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "the same command again" in err
    assert not alive  # no orphaned run goes on training
    assert json.loads((run0 / "summary.json").read_text())["status"] == "interrupted"
    assert not (out / "runs" / "cue-vector-3-rtrl-s1").exists()

    assert main([*ARGS, "--minutes", "0.05", "--out", str(out)]) == 0
    assert "these start over: cue-vector-3-rtrl-s0\n" in capsys.readouterr().out
    rows = list(csv.DictReader(open(out / "memory_runs.csv")))
    assert sorted(r["seed"] for r in rows) == ["0", "1"]
    assert {r["status"] for r in rows} == {"stopped: time limit"}
