"""tools/held_answers.py: where a config's bonus and penalty hold a choice of known stake, with the learner's own
weights (the entropy cap and the penalty in reward units, the reward clip), as a table and CSV."""

import csv

import pytest


def test_quickstart_holds_an_answer_worth_a_tenth_of_the_unit_at_three_quarters(load_tool, tmp_path):
    tool = load_tool("held_answers")
    out = tmp_path / "held.csv"
    assert tool.main(["configs/quickstart.yaml", "--stakes", "0.1,1", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    assert [float(r["entropy_weight"]) for r in rows] == [0.05, 0.05]
    assert float(rows[0]["p_right"]) == pytest.approx(0.763, abs=1e-3)
    assert float(rows[1]["p_right"]) == pytest.approx(0.994, abs=1e-3)


def test_the_learners_weights_follow_the_unit_the_cap_and_the_clip(load_tool):
    from r2ac.config import load_config

    tool = load_tool("held_answers")
    cfg = load_config("configs/quickstart.yaml", [])
    small = tool.held_rows(cfg, 3, 1 / 51, [1 / 51])[0]  # RepeatFirstEasy's unit: the cap sets the bonus
    assert small["entropy_weight"] == pytest.approx(0.25 / 51) and small["logit_penalty"] == pytest.approx(0.001 / 51)
    clipped = tool.held_rows(cfg, 3, 5.0, [1.0])[0]  # rewards of 5 are clipped to 1: u = 1
    assert clipped["stake_over_unit"] == 1.0 and clipped["logit_penalty"] == pytest.approx(0.001)
    lower = tool.held_rows(load_config("configs/quickstart.yaml", ["learner.entropy_cost=0.01"]), 3, 1.0, [0.1])[0]
    assert lower["p_right"] == pytest.approx(0.957, abs=1e-3)
    with pytest.raises(ValueError, match="--unit is the task's largest"):
        tool.held_rows(cfg, 3, 0.0, [0.1])
