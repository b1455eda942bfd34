"""tools/key_apples_picked.py: the share of apples picked and the success, from a real tiny run's metrics.csv (both
in [0, 1], and the share matches the return it is computed from); a run of another task is refused by name."""

import csv

import pytest


def test_share_picked_and_success_of_a_tiny_run(load_tool, tiny_run, tmp_path):
    tool = load_tool("key_apples_picked")
    run = tiny_run("gym:examples.key_apples:KeyApples", "{span: 6, apple_rate: 1.0, apple_reward: 0.5}")
    out = tmp_path / "picked.csv"
    assert tool.main([str(run), "--last", "1000", "--out", str(out)]) == 0
    row = next(csv.DictReader(open(out)))
    assert 0.0 <= float(row["success"]) <= 1.0 and 0.0 <= float(row["picked"]) <= 1.0 and int(row["episodes"]) > 0
    rows = [r for r in csv.DictReader(open(run / "metrics.csv")) if r.get("episode_success", "") not in ("", "nan")]
    n = float(rows[-1]["episodes"])
    ret = sum(float(r["episode_return"]) * c for r, c in
              zip(rows, [float(b["episodes"]) - float(a["episodes"]) for a, b in zip([{"episodes": 0}] + rows, rows)]))
    assert float(row["picked"]) == pytest.approx((ret / n - float(row["success"])) / 0.5 / 4, abs=1e-3)


def test_a_run_of_another_task_is_refused(load_tool, tiny_run):
    run = tiny_run("cue", "{span: 3}")
    with pytest.raises(ValueError, match="not of examples/key_apples.py"):
        load_tool("key_apples_picked").main([str(run)])
