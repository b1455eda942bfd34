"""tools/odd_or_even_readout.py: fresh read-outs trained on a run's fixed core outputs at the query, one row per
head kind and seed; head kinds parsed and refused by name."""

import csv

import numpy as np
import pytest


def test_head_kinds(load_tool):
    tool = load_tool("odd_or_even_readout")
    assert tool.head_kind("linear") == (0, False) and tool.head_kind("tanh64") == (64, False)
    assert tool.head_kind("ln-tanh8") == (8, True) and tool.head_kind("ln-linear") == (0, True)
    assert tool.head_kind("own") == (0, False)
    for bad in ("tanh", "tanh0", "relu64", "ln-"):
        with pytest.raises(ValueError, match="linear, tanhN"):
            tool.head_kind(bad)


def test_readout_rows_score_the_held_out_quarter_per_count(load_tool):
    tool = load_tool("odd_or_even_readout")
    rng = np.random.default_rng(0)
    count = rng.integers(1, 7, size=400)
    outputs = np.c_[2.0 * (count % 2) - 1, rng.normal(size=(400, 3))]  # the parity kept by a unit of its own
    rows = tool.readout_rows("r", outputs, count, ["linear", "ln-tanh4"], [0, 1], 600)
    assert [(r["head"], r["seed"]) for r in rows] == [("linear", 0), ("linear", 1), ("ln-tanh4", 0), ("ln-tanh4", 1)]
    assert all(r["episodes"] == 400 and r["updates"] == 600 for r in rows)
    linear = rows[0]
    assert linear["final"] > 0.95 and linear["updates to 0.9"] <= 600
    assert all(linear[str(k)] > 0.9 for k in range(1, 7))


def test_a_trained_run_read_out_through_the_tool(load_tool, tiny_run, tmp_path):
    run = tiny_run("gym:examples.odd_or_even:OddOrEven", "{span: 8}")
    out = tmp_path / "readout.csv"
    tool = load_tool("odd_or_even_readout")
    assert tool.main([str(run), "--episodes", "40", "--updates", "20", "--heads", "linear,tanh4",
                      "--readout-seeds", "3", "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [(r["head"], r["seed"]) for r in rows] == [("linear", "3"), ("tanh4", "3")]
    assert all(0.0 <= float(r["final"]) <= 1.0 for r in rows) and rows[0]["learning"] == "policy gradient"
    assert tool.main([str(run), "--episodes", "40", "--updates", "3", "--heads", "own", "--batch", "4",
                      "--readout-seeds", "0", "--out", str(out)]) == 0
    with open(out) as f:
        (own,) = list(csv.DictReader(f))
    assert own["head"] == "own" and own["batch"] == "4" and 0.0 <= float(own["start"]) <= 1.0
    assert tool.main([str(run), "--episodes", "40", "--updates", "5", "--heads", "linear", "--supervised",
                      "--out", str(out)]) == 0
    with open(out) as f:
        assert [(r["learning"], r["seed"]) for r in csv.DictReader(f)] == [("supervised", "0"), ("supervised", "1")]
    with pytest.raises(ValueError, match="linear, tanhN"):
        tool.main([str(run), "--episodes", "40", "--heads", "mlp"])
    with pytest.raises(ValueError, match="--episodes 8 or more"):
        tool.main([str(run), "--episodes", "4"])


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/odd_or_even.py's OddOrEven"):
        load_tool("odd_or_even_readout").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "8"])
