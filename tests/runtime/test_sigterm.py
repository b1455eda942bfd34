"""A local run stopped by SIGTERM (``timeout``, ``kill``, a batch scheduler) writes its final checkpoint and
summary as Ctrl-C does, exits 130 and resumes from there. Real training processes, real signals."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from procs import metric_rows, sigterm_when

from r2ac.checkpoint import load_latest_checkpoint
from r2ac.cli import main
from r2ac.config import load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# no periodic checkpoint within the test's life: one on disk after the signal was written by the stop itself
COMMON = ["total_steps=100000000", "logger.tensorboard=false", "logger.progress_bar=false",
          "logger.log_interval_s=0.1", "checkpoint.interval_s=100000"]
IMPALA = ["configs/quickstart.yaml", "runtime.kind=local", "env.num_envs=4", "env.options={corridor_length: 4}",
          "learner.unroll_length=5", "learner.batch_size=8", "model.hidden_size=8", "model.stem_fc=8"]
PPO = ["configs/ppo/base.yaml", "env.id=tmaze", "env.num_envs=2", "env.options={corridor_length: 2}",
       "ppo.rollout_length=8", "ppo.epochs=1", "ppo.minibatches=2", "model.hidden_size=4"]


@pytest.mark.parametrize("args", [IMPALA, PPO], ids=["impala-local", "ppo"])
def test_sigterm_writes_a_checkpoint_and_the_run_resumes(tmp_path, args):
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "r2ac.cli", "train", *args, *COMMON, f"run_dir={run_dir}"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    def nothing_periodic_yet():
        assert load_latest_checkpoint(str(run_dir)) is None

    # it is training (metrics rows after some updates), with no checkpoint yet: the stop must write one
    err = sigterm_when(proc, lambda: metric_rows(run_dir) >= 3, what="metrics", before=nothing_periodic_yet)
    assert proc.returncode == 130, err[-2000:]
    assert "SIGTERM: stopping after the update in progress" in err and "--resume" in err, err[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    last = load_latest_checkpoint(str(run_dir))
    assert last is not None and last["counters"]["step"] == summary["step"] > 0
    step0 = last["counters"]["step"]

    assert main(["train", "--resume", str(run_dir), f"total_steps={step0 + 200}"]) == 0
    new = load_latest_checkpoint(str(run_dir))
    assert new["counters"]["step"] >= step0 + 200
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    if args is IMPALA:  # the optimizer state continued: its step count grew by exactly the new updates
        u0, u1 = last["extra"]["learner"]["updates"], new["extra"]["learner"]["updates"]
        opt0 = float(last["extra"]["learner"]["optimizer"]["state"][0]["step"])
        opt1 = float(new["extra"]["learner"]["optimizer"]["state"][0]["step"])
        assert u1 > u0 and opt1 == opt0 + u1 - u0


@pytest.fixture
def default_handlers():
    """Python's own SIGINT/SIGTERM handlers for the test (a Ray instance an earlier test started in this
    process installs its own, which a run keeps), the previous ones back afterwards."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in previous.items():
        signal.signal(s, h)


def test_a_signal_in_process_stops_cleanly_and_restores_the_handlers(tmp_path, default_handlers):
    from r2ac.runtime.local import train

    cfg = load_config(IMPALA[0], IMPALA[1:] + COMMON + [f"run_dir={tmp_path}"])
    timer = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))  # Ctrl-C, as the terminal sends it
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGINT"):
            train(cfg, time_limit_s=120)  # the limit only keeps a broken test from hanging
    finally:
        timer.cancel()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    summary = json.loads((tmp_path / "summary.json").read_text())
    ck = load_latest_checkpoint(str(tmp_path))
    assert summary["status"] == "interrupted" and ck["counters"]["step"] == summary["step"] > 0
    assert ck["extra"]["learner"]["updates"] > 0
