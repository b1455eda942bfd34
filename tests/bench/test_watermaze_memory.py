"""tools/watermaze_memory.py: the watermaze's steps to the goal before and after the first find, from a real run."""

import csv

import pytest

from r2ac.cli import main

TINY = ["env.num_envs=4", "learner.batch_size=2", "model.hidden_size=8", "logger.progress_bar=false",
        "logger.log_interval_s=0.2", "checkpoint.interval_s=.inf"]


def test_watermaze_memory_reads_a_real_run(tmp_path, capsys, load_tool):
    run = tmp_path / "run"
    assert main(["train", "quickstart", f"run_dir={run}", "env.id=watermaze",
                 "env.options={size: 3, episode_length: 40}", "total_steps=400", *TINY]) == 0
    tool = load_tool("watermaze_memory")
    out = tmp_path / "memory.csv"
    assert tool.main([str(run), "--episodes", "24", "--out", str(out)]) == 0
    assert "| run | goals per episode | steps to the first goal |" in capsys.readouterr().out
    (row,) = list(csv.DictReader(open(out)))
    assert row["run"] == "run" and row["episodes"] == "24"
    first, later = float(row["steps_to_first_goal"]), float(row["mean_steps_to_goal_after_first"])
    # a 3x3 arena in 40 steps: even a random walk finds the goal, and more than once
    assert 1.0 <= first <= 40.0 and 1.0 <= later <= 40.0 and float(row["goals_found"]) > 1.0
    assert float(row["after_over_first"]) == pytest.approx(later / first)
    other = tmp_path / "tmaze"
    assert main(["train", "quickstart", f"run_dir={other}", "env.options={corridor_length: 3}", "total_steps=200",
                 *TINY]) == 0
    with pytest.raises(SystemExit, match="not of the watermaze"):
        tool.main([str(other)])


def test_watermaze_memory_labels_runs_that_share_a_name():
    from r2ac.bench.common import run_labels as labels

    assert labels(["a/runs/wm-s0", "a/runs/wm-s1"]) == ["wm-s0", "wm-s1"]
    assert labels(["a/runs/wm-s0", "b/runs/wm-s0/", "c/wm-s1"]) == ["a/wm-s0", "b/wm-s0", "wm-s1"]
    assert labels(["x/wm", "y/wm"]) == ["x/wm", "y/wm"]


def test_labelled_runs_hold_one_torch_thread_while_the_loop_runs():
    import torch

    from r2ac.bench.common import labelled_runs

    before = torch.get_num_threads()
    seen = []
    for run, label in labelled_runs(["a/runs/wm-s0", "b/runs/wm-s0"]):
        seen.append((run, label, torch.get_num_threads()))
    assert seen == [("a/runs/wm-s0", "a/wm-s0", 1), ("b/runs/wm-s0", "b/wm-s0", 1)]
    assert torch.get_num_threads() == before
