"""tools/core_units.py: which core units still vary, on synthetic outputs and on real (tiny) runs."""

import csv

import numpy as np
import pytest
import torch


def test_unit_stats(load_tool):
    tool = load_tool("core_units")
    y = np.zeros((4, 3))
    y[1:, 0] = [0.5, 0.0, 2.0]  # unit 0 varies; unit 1 is 0 throughout; unit 2 is a constant 0.3
    y[:, 2] = 0.3
    s = tool.unit_stats(y)
    assert s == {"steps": 4, "units": 3, "live": pytest.approx(1 / 3), "nonzero": pytest.approx(6 / 12),
                 "all_zero": 0.0}
    y[:, 2] = 0.0
    assert tool.unit_stats(y)["all_zero"] == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="at least one step"):
        tool.unit_stats(np.zeros((0, 3)))


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_core_units_reads_feedforward_runs(tmp_path, capsys, load_tool, tiny_run, activation):
    """A real run of the feed-forward core: its outputs are the ones the tool records (relu's are >= 0 and
    some are 0; tanh's are never exactly 0), and the table names the activation."""
    tool = load_tool("core_units")
    run = tiny_run("cue", "{span: 3, obs: vector}", "model.core=none", "model.learning=tbptt",
                   f"model.core_options={{activation: {activation}}}")
    from r2ac.api import load
    from r2ac.bench.common import untrained_policy

    y = tool.played_outputs(load(str(run)), 4, 0)
    assert y.shape == (4 * 5, 8)  # 4 episodes of span + 2 steps, 8 units
    assert (y >= 0).all() and (y == 0).any() if activation == "relu" else (y != 0).all()
    out = tmp_path / "units.csv"
    assert tool.main([str(run), "--episodes", "4", "--out", str(out)]) == 0
    row = next(csv.DictReader(open(out)))
    assert row["core"] == f"none ({activation})" and row["units"] == "8" and row["steps"] == "20"
    assert 0.0 < float(row["live"]) <= 1.0
    assert "| live |" in capsys.readouterr().out
    assert tool.main([str(run), "--episodes", "4", "--out", str(out), "--untrained"]) == 0
    fresh = next(csv.DictReader(open(out)))
    assert fresh["core"] == row["core"] and fresh["steps"] == "20"
    trained = load(str(run)).net.core.linear.weight
    assert not torch.equal(untrained_policy(str(run), 0).net.core.linear.weight, trained)
    assert torch.equal(untrained_policy(str(run), 0).net.core.linear.weight,
                       untrained_policy(str(run), 1).net.core.linear.weight)  # seeded by the run's seed
