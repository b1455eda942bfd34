"""tools/look_first_answers.py: answers split by whether the agent looked, stand-in agents that look and keep the
colour, never look, look by chance, or look and keep nothing, and a real run's checkpoint played through the
tool."""

import math

import numpy as np
import pytest


class Looker:
    """A stand-in agent. On the look window's frames it looks (``how`` = ``"look"`` or ``"forget"``), never looks
    (``"blind"``) or takes a random action (``"chance"``); it keeps the colour it is shown in its state (a looked
    flag and the colour one-hot), except ``"forget"``, which keeps only that it looked; at the query it names the
    kept colour, or guesses."""

    def __init__(self, how, seed=0):
        from r2ac.envs.gym_env import import_user_module

        self.how, self.example = how, import_user_module("examples.look_first")
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 4))

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state, action = state.copy(), np.zeros(len(obs), int)
        for e, frame in enumerate(obs):
            if (frame == self.example.WINDOW).all():
                action[e] = {"look": 3, "forget": 3, "blind": 0, "chance": int(self.rng.integers(4))}[self.how]
            elif (frame == self.example.QUERY).all():
                kept = state[e, 1:]
                action[e] = int(kept.argmax()) if kept.any() else int(self.rng.integers(3))
            elif frame.any():  # the colour, shown after a look
                state[e, 0] = 1.0
                if self.how != "forget":
                    lit = frame.any(axis=0)
                    colour = next(c for c, rgb in enumerate(self.example.COLOURS)
                                  if (frame[:, lit] == rgb[:, None]).all())
                    state[e, 1 + colour] = 1.0
        return action, state


@pytest.mark.parametrize("how, looked, at_0, right_looked, right_blind", [
    ("look", 1.0, 1.0, 1.0, None), ("blind", 0.0, 0.0, None, 1 / 3), ("forget", 1.0, 1.0, 1 / 3, None),
    ("chance", 1 - 0.75 ** 3, 0.25, 1.0, 1 / 3)])
def test_whether_it_looks_and_keeps_what_it_saw_is_told_by_the_columns(load_tool, how, looked, at_0, right_looked,
                                                                      right_blind):
    tool = load_tool("look_first_answers")
    right, seen = tool.answers_by_look(Looker(how), {"span": 6}, episodes=1500, num_envs=50, seed=3)
    assert seen.shape == (4,) and seen.sum() == 1500
    row = tool.row_for("looker", 0, 6, right, seen)
    assert row["episodes"] == 1500
    assert row["looked"] == pytest.approx(looked, abs=0.04) and row["looked at 0"] == pytest.approx(at_0, abs=0.04)
    for col, expected in (("right, looked", right_looked), ("right, blind", right_blind)):
        assert math.isnan(row[col]) if expected is None else row[col] == pytest.approx(expected, abs=0.05)
    expected_all = looked * (right_looked or 0) + (1 - looked) * (right_blind or 0)
    assert row["all"] == pytest.approx(expected_all, abs=0.05)


def test_the_probe_reads_the_look_and_the_colour_where_they_were_kept(load_tool):
    tool = load_tool("look_first_answers")
    record = {}
    tool.answers_by_look(Looker("chance"), {"span": 5}, episodes=1000, num_envs=50, seed=5, record=record)
    assert record["state"].shape == (1000, 4) and record["group"].max() < 12
    cols = tool.probe_columns(record)
    assert cols["look read"] == pytest.approx(1.0, abs=0.02)
    assert cols["colour read, looked"] == pytest.approx(1.0, abs=0.02)
    assert "colour read from outputs, looked" not in cols  # a stand-in has no outputs
    record = {}
    tool.answers_by_look(Looker("forget"), {"span": 5}, episodes=600, num_envs=50, seed=5, record=record)
    cols = tool.probe_columns(record)
    assert math.isnan(cols["look read"])  # it looked every time: nothing to tell apart
    assert cols["colour read, looked"] < 0.45  # it kept no colour


def test_groups_hold_the_look_frame_and_the_colour(load_tool):
    tool = load_tool("look_first_answers")
    assert {tool.group_of(t, c) for t in range(-1, 3) for c in range(3)} == set(range(12))
    assert tool.group_of(-1, 2) == 2 and tool.group_of(0, 0) == 3


def test_bad_counts_are_refused(load_tool):
    tool = load_tool("look_first_answers")
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_look(Looker("look"), {"span": 6}, episodes=episodes, num_envs=num_envs)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("look_first_answers", "gym:examples.look_first:LookFirst", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert 0.0 <= float(row["looked"]) <= 1.0 and 0.0 <= float(row["all"]) <= 1.0


def test_a_trained_runs_state_is_probed_and_too_few_episodes_refused(probed_row):
    row = probed_row("look_first_answers", "gym:examples.look_first:LookFirst", "{span: 6}", too_few=12)
    for col in ("look read", "colour read, looked", "colour read from outputs, looked"):
        assert row[col] == "nan" or 0.0 <= float(row[col]) <= 1.0


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/look_first.py's LookFirst"):
        load_tool("look_first_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
