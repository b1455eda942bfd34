"""Progress wherever the output goes: a live bar on a terminal, one status line per log interval
elsewhere (``ray job logs``, CI, nohup, container logs)."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from r2ac import logger as logger_mod
from r2ac.logger import Progress, progress


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def lines_of(buf: io.StringIO) -> list[str]:
    return [line for line in buf.getvalue().splitlines() if line.strip()]


def test_one_line_per_interval_with_rate_frames_return_and_eta(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(logger_mod.time, "monotonic", clock)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    p = progress(10_000, interval_s=5.0, frames_per_step=4)
    assert p.mode == "lines"
    for k in range(1, 10):  # 1 s apart, 100 steps each: one line after 5 s
        clock.t += 1.0
        p.update(100 * k, episode_return=0.5 if k > 2 else None)
    lines = lines_of(out)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "step 500/10,000 (5.0%)" in line
    assert "100 steps/s" in line and "400 frames/s" in line
    assert "return 0.5" in line
    assert "ETA 1m35s" in line  # 9,500 steps left at 100 steps/s
    clock.t += 5.0
    p.update(1500)  # 600 steps in the last 5 s... one more line, rate over that interval
    assert len(lines_of(out)) == 2 and "111 steps/s" in lines_of(out)[-1]  # 1,000 steps in 9 s
    p.update(1500)
    assert len(lines_of(out)) == 2  # nothing new within the interval
    clock.t += 1.0
    p.update(10_000)
    p.close()  # the last stretch is printed at close, with the elapsed time
    last = lines_of(out)[-1]
    assert "step 10,000/10,000 (100.0%)" in last and "elapsed 15s" in last
    p.close()
    assert len(lines_of(out)) == 3


def test_no_return_yet_and_no_rate_yet_say_so(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(logger_mod.time, "monotonic", clock)
    p = Progress(100, mode="lines", interval_s=1.0, file=io.StringIO())
    clock.t += 2.0
    line = p.status_line()
    assert "return -" in line and "ETA -" in line and "0 steps/s" in line


def test_resumed_run_counts_its_rate_from_the_resumed_step(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(logger_mod.time, "monotonic", clock)
    buf = io.StringIO()
    p = Progress(2_000_000, initial=1_000_000, mode="lines", interval_s=10.0, file=buf)
    clock.t += 10.0
    p.update(1_001_000)
    assert "100 steps/s" in buf.getvalue()


def test_off_prints_nothing(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    p = progress(100, enabled=False, interval_s=0.0)
    p.update(50, episode_return=1.0)
    p.close()
    assert not p.enabled and out.getvalue() == ""


def test_bad_mode_is_one_clear_error():
    try:
        Progress(10, mode="fancy")
    except ValueError as e:
        assert "bar, lines or off" in str(e)
    else:
        raise AssertionError("no error for an unknown mode")


def test_a_training_run_piped_to_a_file_logs_status_lines(tmp_path):
    # The real thing: `r2ac train` with stdout not a terminal (as under `ray job logs`, nohup or CI).
    cmd = [sys.executable, "-m", "r2ac.cli", "train", "configs/quickstart.yaml", "total_steps=1600",
           "logger.log_interval_s=0.5", "env.num_envs=8", "learner.batch_size=8", "eval.sets=0",
           f"run_dir={tmp_path / 'run'}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                         cwd=str(logger_mod.__file__).rsplit("/r2ac/", 1)[0])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    status = [line for line in out.stdout.splitlines() if line.startswith("[train] step ")]
    assert status, out.stdout[-2000:]
    assert re.search(r"\[train\] step 1,600/1,600 \(100\.0%\) .* steps/s .* frames/s .* elapsed", status[-1])
    assert "\r" not in out.stdout and "\r" not in out.stderr  # no bar redraws in a log
