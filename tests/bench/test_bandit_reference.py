"""tools/bandit_reference.py: classical strategies on POPGym's bandit, checked against the closed form of the
best arm, against chance, and against POPGym's own env played by the same strategy."""

import csv
import json

import numpy as np
import pytest


def test_best_arm_and_uniform_match_their_closed_forms(load_tool):
    tool = load_tool("bandit_reference")
    arms, pulls = 10, 200
    best = tool.best_arm(arms, pulls, 20000, seed=0)
    assert best.mean() == pytest.approx(2 * arms / (arms + 1) - 1, abs=0.01)  # E[max of 10 U(0,1)] = 10/11
    uniform = tool.play(tool.STRATEGIES["uniform"], arms, pulls, 4000, seed=1)
    assert abs(uniform.mean()) < 0.02


def test_strategies_order_as_bandit_theory_says(load_tool):
    tool = load_tool("bandit_reference")
    rows = {r["strategy"]: r for r in tool.reference_rows(10, 200, 2000, seed=3)}
    best = rows["best arm (knows the chances)"]["mean_return"]
    for name in ("Thompson", "each once, then greedy", "greedy on the posterior mean"):
        assert 0.3 < rows[name]["mean_return"] < best  # they learn the arms, and pay for learning them
    assert rows["Thompson"]["mean_return"] > rows["uniform"]["mean_return"] + 0.3
    assert all(r["stderr"] > 0 and r["episodes"] == 2000 for r in rows.values())


def test_the_simulation_is_popgyms_bandit(load_tool):
    """The same strategy on POPGym's env (its arms, its pay) and on the tool's numpy copy: the same mean."""
    popgym = pytest.importorskip("popgym.envs.multiarmed_bandit")
    tool = load_tool("bandit_reference")
    env = popgym.MultiarmedBanditEasy()
    arms, pulls, episodes = env.num_bandits, env.max_episode_length, 150
    choose = tool.STRATEGIES["each once, then greedy"]
    returns = []
    for e in range(episodes):
        env.reset(seed=e)
        paid, pulled, total, done, t = np.zeros((1, arms)), np.zeros((1, arms)), 0.0, False, 0
        while not done:
            a = int(choose(t, paid, pulled, None)[0])
            obs, reward, terminated, truncated, _ = env.step(a)
            paid[0, a] += obs
            pulled[0, a] += 1
            total += reward
            done = terminated or truncated
            t += 1
        assert t == pulls
        returns.append(total)
    simulated = tool.play(choose, arms, pulls, 4000, seed=0)
    se = np.std(returns, ddof=1) / np.sqrt(episodes)
    assert np.mean(returns) == pytest.approx(simulated.mean(), abs=4 * se + 0.01)


def test_main_writes_rows_and_adds_trained_runs(tmp_path, capsys, load_tool):
    tool = load_tool("bandit_reference")
    run = tmp_path / "runs" / "popgym-MultiarmedBanditEasy-200-rtrl-s0"
    run.mkdir(parents=True)
    (run / "fresh.json").write_text(json.dumps({"mean": 0.5, "episodes": 96, "step": 1}))
    out = tmp_path / "ref.csv"
    assert tool.main([str(run), "--episodes", "50", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| Thompson |" in text and "| trained: popgym-MultiarmedBanditEasy-200-rtrl-s0 | 0.500 | - | 0.750 |" in text
    rows = list(csv.DictReader(open(out)))
    assert len(rows) == 1 + len(tool.STRATEGIES) + 1 and rows[-1]["mean_return"] == "0.5"


def test_bad_input_is_refused(tmp_path, load_tool):
    tool = load_tool("bandit_reference")
    with pytest.raises(SystemExit, match="no such run directory"):
        tool.main([str(tmp_path / "missing"), "--episodes", "10"])
    with pytest.raises(SystemExit):
        tool.main(["--episodes", "1"])
