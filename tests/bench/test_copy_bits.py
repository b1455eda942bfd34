"""tools/copy_bits.py: per-position accuracy on the copy task, checked with scripted policies and a real run."""

import csv

import numpy as np
import pytest

from r2ac.cli import main


class Recorder:
    """Remembers the bits shown (entries 0/1 of the observation) and plays back the first ``keep`` of them;
    the others it answers with 0."""

    def __init__(self, keep):
        self.keep = keep

    def initial_state(self, n):
        return {"bits": [], "asked": 0}

    def act(self, obs, state, reward=None, done=None):
        shown = obs[:, :2].sum(1) > 0
        if shown.all():
            state["bits"].append(obs[:, 1].astype(np.int64))
        if obs[:, 3].all():
            k = state["asked"]
            state["asked"] += 1
            return (state["bits"][k] if k < self.keep else np.zeros(len(obs), dtype=np.int64)), state
        return np.zeros(len(obs), dtype=np.int64), state


def test_bit_accuracy_lines_up_each_query_with_its_bit(load_tool):
    tool = load_tool("copy_bits")
    acc = tool.bit_accuracy(Recorder(keep=3), span=5, symbols=3, episodes=400)
    assert acc.tolist() == [1.0, 1.0, 1.0, 1.0]
    acc = tool.bit_accuracy(Recorder(keep=1), span=5, symbols=3, episodes=4000)
    assert acc[0] == 1.0
    assert acc[1] == pytest.approx(0.5, abs=0.04) and acc[2] == pytest.approx(0.5, abs=0.04)  # 0 is right half the time
    assert acc[3] == pytest.approx(0.25, abs=0.04)


def test_copy_bits_reads_a_real_run(tmp_path, capsys, load_tool, tiny_run):
    run = tiny_run("copy", "{span: 2, symbols: 2}")
    tool = load_tool("copy_bits")
    out = tmp_path / "bits.csv"
    assert tool.main([str(run), "--episodes", "200", "--out", str(out)]) == 0
    assert "| run | actions | bit 1 | bit 2 | all bits right |" in capsys.readouterr().out
    rows = list(csv.DictReader(open(out)))
    assert [r["actions"] for r in rows] == ["sampled", "greedy"]
    for r in rows:
        bits = [float(r["bit_1"]), float(r["bit_2"])]
        assert all(0.0 <= b <= 1.0 for b in bits) and float(r["all_right"]) <= min(bits)
    with pytest.raises(SystemExit, match="not of the copy task"):
        other = tmp_path / "cue"
        assert main(["train", "quickstart", f"run_dir={other}", "env.id=cue", "env.options={span: 2, obs: vector}",
                     "env.num_envs=4", "learner.batch_size=2", "model.hidden_size=8", "total_steps=200",
                     "logger.progress_bar=false", "checkpoint.interval_s=.inf"]) == 0
        tool.main([str(other)])


def test_linear_probe_reads_a_linear_code_and_not_noise(load_tool):
    import torch
    tool = load_tool("copy_bits")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 800)
    x = torch.as_tensor(rng.normal(size=(800, 6)))
    assert tool.linear_probe_accuracy(x, y) == pytest.approx(0.5, abs=0.1)    # nothing of y in x
    x[:, 2] = 0.2 * (2 * torch.as_tensor(y) - 1) + 0.01 * x[:, 3]             # y on one axis, a small margin
    assert tool.linear_probe_accuracy(x, y) == 1.0


def test_patterns_and_probe_of_a_real_run(tmp_path, capsys, load_tool, tiny_run):
    run = tiny_run("copy", "{span: 2, symbols: 2}")
    tool = load_tool("copy_bits")
    from r2ac.api import load
    bits, acts, gaps, states = tool.query_internals(load(str(run)), span=2, symbols=2, episodes=64)
    assert bits.shape == acts.shape == gaps.shape == (64, 2) and states.shape[:2] == (64, 2)
    assert set(np.unique(acts)) <= {0, 1} and np.isfinite(gaps).all()
    assert tool.main([str(run), "--episodes", "64", "--patterns", "--probe"]) == 0
    out = capsys.readouterr().out
    assert "| bits | episodes | query 1 | query 2 |" in out and "| state at | bit 1 | bit 2 |" in out
    assert out.count("\n| 0") + out.count("\n| 1") >= 4  # the patterns' rows (00, 01, 10, 11; all seen in 64)
