"""tools/keydoor_value.py: the value gap between episodes that hold the key and those that do not, as a
fraction of the exact gap, on synthetic values and on real (tiny) key-to-door runs."""

import csv

import numpy as np
import pytest


def test_value_gaps_against_the_exact_gap(load_tool):
    tool = load_tool("keydoor_value")
    span, gamma = 6, 0.9
    held = np.arange(10) % 2 == 0
    t = np.arange(span + 2)[:, None]
    exact = np.where(held[None], gamma ** (span + 1 - t), 0.0)  # the values of an agent that knows
    gaps = tool.value_gaps(exact + 0.3, held, span, gamma)
    assert gaps == pytest.approx({"gap_1": 1.0, "gap_2": 1.0, "gap_mid": 1.0, "gap_door": 1.0})
    forgets = exact.copy()
    forgets[3:] = 0.5  # from step 3 on the value no longer tells the groups apart
    gaps = tool.value_gaps(forgets, held, span, gamma)
    assert gaps["gap_1"] == pytest.approx(1.0) and gaps["gap_mid"] == gaps["gap_door"] == 0.0
    with pytest.raises(ValueError, match="hold the key and episodes that do not"):
        tool.value_gaps(exact, np.ones(10, dtype=bool), span, gamma)


def test_keydoor_value_reads_runs(tmp_path, capsys, load_tool, tiny_run):
    tool = load_tool("keydoor_value")
    run = tiny_run("keydoor", "{span: 3, obs: vector}", "checkpoint.interval_s=0.01", "checkpoint.keep=10")
    out = tmp_path / "kv.csv"
    assert tool.main([str(run), "--episodes", "16", "--out", str(out)]) == 0
    row = next(csv.DictReader(open(out)))
    assert row["span"] == "3" and row["episodes"] == "16" and 0.0 <= float(row["p_take"]) <= 1.0
    assert all(np.isfinite(float(row[k])) for k in ("gap_1", "gap_2", "gap_mid", "gap_door"))
    assert float(row["value_spread"]) > 0
    assert "| gap_door |" in capsys.readouterr().out
    every = tmp_path / "every.csv"
    assert tool.main([str(run), "--episodes", "4", "--every-checkpoint", "--out", str(every)]) == 0
    steps = [int(r["step"]) for r in csv.DictReader(open(every))]
    assert len(steps) >= 2 and steps == sorted(steps) and steps[-1] == int(row["step"])
    with pytest.raises(SystemExit, match="at least 2"):
        tool.main([str(run), "--episodes", "1"])
    other = tmp_path / "cue-run"
    other.mkdir()
    (other / "config.yaml").write_text((run / "config.yaml").read_text().replace("id: keydoor", "id: cue"))
    with pytest.raises(SystemExit, match="not a key-to-door run"):
        tool.main([str(other)])


def test_a_memoryless_value_has_no_gap_after_the_key_held_frame(tmp_path, load_tool, tiny_run):
    """A feed-forward agent sees the same frames from step 2 on whether it holds the key or not (its inputs
    are the frame and the episode-start flag), so its value gap there is exactly 0."""
    tool = load_tool("keydoor_value")
    from r2ac.api import load_checkpoint_for, policy_from_checkpoint
    from r2ac.config import load_config

    run = tiny_run("keydoor", "{span: 4, obs: vector}", "model.core=none", "model.core_options={}",
                   "model.learning=tbptt")
    cfg = load_config(str(run / "config.yaml"))
    r = tool.play(policy_from_checkpoint(load_checkpoint_for(str(run)), cfg), dict(cfg.env.options), 32,
                  cfg.learner.discount)
    assert r["gap_2"] == r["gap_mid"] == r["gap_door"] == 0.0 and r["gap_1"] != 0.0 and r["value_spread"] > 0
