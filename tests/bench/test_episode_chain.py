"""tools/episode_chain.py: returns of consecutive episodes from fresh envs, from a real run, and the table's columns."""

import csv

import numpy as np
import pytest

from r2ac.cli import main

TINY = ["env.num_envs=4", "learner.batch_size=2", "model.hidden_size=8", "logger.progress_bar=false",
        "logger.log_interval_s=0.2", "checkpoint.interval_s=.inf"]


def test_chain_row_separates_episodes_after_paid_and_unpaid_ones(load_tool):
    row = load_tool("episode_chain").chain_row(np.array([[0.0, 0.0, 1.0, 1.0],   # unpaid, unpaid, paid
                                                          [1.0, 1.0, 0.0, 1.0]]))  # paid, paid, unpaid
    assert (row["envs"], row["episodes"], row["first"]) == (2, 4, 0.5)
    assert row["later"] == pytest.approx(4 / 6)
    assert row["after_paid"] == pytest.approx(2 / 3) and row["after_unpaid"] == pytest.approx(2 / 3)
    assert row["n_after_unpaid"] == 3


def test_episode_chain_reads_a_real_run(tmp_path, capsys, load_tool):
    run = tmp_path / "run"
    assert main(["train", "quickstart", f"run_dir={run}", "env.id=cue", "env.options={span: 3, obs: vector}",
                 "total_steps=300", *TINY]) == 0
    tool = load_tool("episode_chain")
    out = tmp_path / "chain.csv"
    assert tool.main([str(run), "--envs", "6", "--episodes", "3", "--out", str(out),
                      "--set", "model.carry_inputs_across_episodes=true"]) == 0
    assert "| run | first episode | later episodes |" in capsys.readouterr().out
    (row,) = list(csv.DictReader(open(out)))
    assert row["run"] == "run" and (row["envs"], row["episodes"]) == ("6", "3")
    for k in ("first", "later"):  # one reward of 0 or 1 per episode of the delayed cue
        assert 0.0 <= float(row[k]) <= 1.0
    assert int(row["n_after_unpaid"]) <= 12
    # the episodes themselves: each env's first ones, each a 0/1 return
    from r2ac.api import load

    returns = tool.episode_returns(load(str(run)), "cue", {"span": 3, "obs": "vector"}, 5, 2, 0)
    assert returns.shape == (5, 2) and set(np.unique(returns)) <= {0.0, 1.0}
    with pytest.raises(SystemExit, match="--episodes"):
        tool.main([str(run), "--episodes", "1"])
