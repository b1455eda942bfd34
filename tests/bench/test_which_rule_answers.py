"""tools/which_rule_answers.py: answers split by the rule, stand-in agents that keep the rule, keep none and name
the colour, or guess between the two readings, and a real run's checkpoint played through the tool."""

import numpy as np
import pytest


class Reader:
    """A stand-in agent that reads the query right and, at the query, names what ``how`` says: ``"rule"`` what the
    rule it kept in its state asks for, ``"colour"`` always the colour (it keeps no rule), ``"guess"`` the colour or
    the place at random."""

    def __init__(self, how, seed=0):
        from r2ac.envs.gym_env import import_user_module

        example = import_user_module("examples.which_rule")
        self.how, self.example = how, example
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 2))  # the rule, one-hot, where kept

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state, action = state.copy(), np.zeros(len(obs), int)
        for e, frame in enumerate(obs):
            rules = [r for r, rgb in enumerate(self.example.RULES) if (frame == rgb[:, None, None]).all()]
            if rules and self.how == "rule":
                state[e] = np.eye(2)[rules[0]]
            square = ~(frame == self.example.QUERY).all(axis=0)
            if (frame == self.example.QUERY).any() and square.any():  # the query
                colour = next(c for c, rgb in enumerate(self.example.COLOURS)
                              if (frame[:, square] == rgb[:, None]).all())
                place = int(np.nonzero(square)[1].min()) // (frame.shape[2] // 3)
                rule = {"rule": int(state[e].argmax()), "colour": 0, "guess": int(self.rng.integers(2))}[self.how]
                action[e] = place if rule else colour
        return action, state


@pytest.mark.parametrize("how, expected", [("rule", (1, 1)), ("colour", (1, 0)), ("guess", (0.5, 0.5))])
def test_what_is_kept_of_the_rule_is_told_by_the_rules_answered(load_tool, how, expected):
    tool = load_tool("which_rule_answers")
    right, seen = tool.answers_by_rule(Reader(how), {"span": 6}, episodes=1200, num_envs=50, seed=3)
    assert seen.sum() == 1200 and all(abs(s / 1200 - 1 / 2) < 0.05 for s in seen)
    shares = right / seen
    assert np.allclose(shares, expected, atol=0.06), shares
    row = tool.row_for("reader", 0, 6, right, seen)
    assert row["all"] == pytest.approx(sum(expected) / 2, abs=0.05)
    assert (row["colour"], row["place"]) == pytest.approx(tuple(shares))


@pytest.mark.parametrize("how, rule_read, gap", [("rule", 1.0, 2.0), ("colour", 0.5, 0.0)])
def test_the_probe_reads_the_rule_where_it_was_kept(load_tool, how, rule_read, gap):
    tool = load_tool("which_rule_answers")
    record = {}
    tool.answers_by_rule(Reader(how), {"span": 5}, episodes=1000, num_envs=50, seed=5, record=record)
    assert record["state"].shape == (1000, 2) and record["group"].max() < 6
    cols = tool.probe_columns(record)
    assert cols["rule read"] == pytest.approx(rule_read, abs=0.07)
    assert cols["rule gap"] == pytest.approx(gap, abs=0.01)
    assert 0.0 <= cols["answer read"] <= 1.0 and "answer read from outputs" not in cols  # a stand-in has no outputs


def test_the_rule_gap_is_scaled_by_the_states_spread(load_tool):
    """A faint trace of the rule beside noise has a small gap; the same states scaled up keep theirs."""
    tool = load_tool("which_rule_answers")
    rng = np.random.default_rng(0)
    rules = rng.integers(2, size=4000)
    state = rng.normal(size=(4000, 8))
    state[:, 0] += 0.3 * rules
    faint = tool.rule_gap(state, rules)
    assert 0.05 < faint < 0.2 and tool.rule_gap(1000 * state, rules) == pytest.approx(faint)
    floor = tool.shuffled_gap(state, rules)
    assert floor == pytest.approx(2 / np.sqrt(4000), rel=0.25) and floor < faint
    state[:, 0] += 20 * rules
    assert tool.rule_gap(state, rules) > 1.5


def test_groups_hold_the_rule_and_the_answer(load_tool):
    tool = load_tool("which_rule_answers")
    assert {tool.group_of(r, a) for r in range(2) for a in range(3)} == set(range(6))
    assert tool.group_of(1, 2) == 5


def test_bad_counts_are_refused(load_tool):
    tool = load_tool("which_rule_answers")
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_rule(Reader("rule"), {"span": 6}, episodes=episodes, num_envs=num_envs)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("which_rule_answers", "gym:examples.which_rule:WhichRule", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert all(0.0 <= float(row[k]) <= 1.0 for k in ("colour", "place", "all"))


def test_a_trained_runs_state_is_probed_and_too_few_episodes_refused(probed_row):
    row = probed_row("which_rule_answers", "gym:examples.which_rule:WhichRule", "{span: 6}", too_few=12)
    assert all(0.0 <= float(row[k]) <= 1.0 for k in ("rule read", "answer read", "answer read from outputs"))
    assert float(row["rule gap"]) >= 0.0 and float(row["rule gap shuffled"]) >= 0.0


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/which_rule.py's WhichRule"):
        load_tool("which_rule_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
