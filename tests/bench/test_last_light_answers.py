"""tools/last_light_answers.py: answers split by the kind of episode (how many lights, whether the first had the
last one's colour), stand-in agents that keep the last light, the first, or nothing, and a real run's checkpoint
played through the tool."""

import numpy as np
import pytest


class Keeper:
    """A stand-in agent that keeps the colour of the ``which`` ("first" or "last") light it saw, or nothing
    (None), and names it at the query (a guess where it kept nothing)."""

    def __init__(self, which, seed=0):
        from r2ac.envs.gym_env import import_user_module

        self.which, self.colours = which, import_user_module("examples.last_light").COLOURS
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.full(n, -1)

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state = state.copy()
        for e, frame in enumerate(obs):
            for c, rgb in enumerate(self.colours):
                if (frame == rgb[:, None, None]).all(axis=0).any():  # a light of colour c
                    if self.which == "last" or (self.which == "first" and state[e] < 0):
                        state[e] = c
        action = self.rng.integers(len(self.colours), size=len(obs))
        return np.where(state >= 0, state, action) if self.which else action, state


@pytest.mark.parametrize("which, expected", [("last", (1, 1, 1, 1)), ("first", (1, 0, 1, 0)),
                                             (None, (1 / 3,) * 4)])
def test_the_light_kept_is_told_by_the_kinds_answered(load_tool, which, expected):
    tool = load_tool("last_light_answers")
    right, seen = tool.answers_by_kind(Keeper(which), {"span": 12}, episodes=1500, num_envs=50, seed=3)
    assert seen.sum() == 1500 and abs(seen[0] / 1500 - 1 / 3) < 0.05 and abs(seen[1] / 1500 - 1 / 3) < 0.05
    assert abs(seen[2] / 1500 - 1 / 6) < 0.04  # three lights: the last is the first's colour half the time
    shares = right / seen
    assert np.allclose(shares, expected, atol=0.07), shares
    row = tool.row_for("keeper", 0, 12, right, seen)
    assert row["overwrites"] == pytest.approx({"last": 1.0, "first": 0.0, None: 1 / 3}[which], abs=0.06)


def test_kinds_of_episode_and_bad_counts(load_tool):
    tool = load_tool("last_light_answers")
    assert [tool.kind_of(x) for x in ({4: 2}, {1: 0, 5: 1}, {0: 1, 2: 0, 3: 1}, {0: 1, 2: 0, 3: 2})] == [0, 1, 2, 3]
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_kind(Keeper("last"), {"span": 12}, episodes=episodes, num_envs=num_envs)
    with pytest.raises(ValueError, match="max_count <= 3"):
        tool.answers_by_kind(Keeper("last"), {"span": 12, "max_count": 4}, episodes=4)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("last_light_answers", "gym:examples.last_light:LastLight", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert 0.0 <= float(row["all"]) <= 1.0 and 0.0 <= float(row["overwrites"]) <= 1.0
    assert set(row) >= {"1 light", "2 lights", "3, first = last", "3, first != last"}


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/last_light.py's LastLight"):
        load_tool("last_light_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
