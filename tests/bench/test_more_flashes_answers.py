"""tools/more_flashes_answers.py: answers split by the count and the split of the flashes, and by whether the last
or the first flash was outvoted; stand-in agents that count, keep the last flash's side, the first's, or nothing;
a real run's checkpoint played through the tool."""

import numpy as np
import pytest


SPAN = 12


class Keeper:
    """A stand-in agent that keeps a running count of the flashes (right minus left, ``which`` "count"), a count of
    those in the second half of the span only ("late"), the side of the last or the first flash, or nothing
    (None), and answers with it at the query (a guess where it has nothing to go on)."""

    def __init__(self, which, seed=0):
        self.which = which
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 2), int)  # [:, 0] frames seen; [:, 1] right minus left, or the side kept (-1, +1)

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state = state.copy()
        half = obs.shape[3] // 2
        for e, frame in enumerate(obs):
            lit = (frame == 255).all(axis=0)
            if lit.any():
                side = 1 if lit[:, half:].any() else -1
                if self.which == "count" or (self.which == "late" and 2 * state[e, 0] >= SPAN):
                    state[e, 1] += side
                elif self.which == "last" or (self.which == "first" and state[e, 1] == 0):
                    state[e, 1] = side
        state[:, 0] += 1
        guess = self.rng.integers(2, size=len(obs))
        return (np.where(state[:, 1] != 0, (state[:, 1] > 0).astype(int), guess) if self.which else guess), state


@pytest.mark.parametrize("which, kinds, last_out, first_out, early", [
    ("count", (1,) * 6, 1, 1, 1), ("last", (1, 2 / 3, 1, 0.6, 0.8, 1), 0, None, None),
    ("first", (1, 2 / 3, 1, 0.6, 0.8, 1), None, 0, None), ("late", None, None, None, 0.5),
    (None, (0.5,) * 6, 0.5, 0.5, 0.5)])
def test_what_is_kept_is_told_by_the_kinds_answered(load_tool, which, kinds, last_out, first_out, early):
    tool = load_tool("more_flashes_answers")
    right, seen = tool.answers_by_group(Keeper(which), {"span": SPAN}, episodes=3000, num_envs=100, seed=3)
    assert seen.sum() == 3000 and abs(seen[:8].sum() / 3000 - 1 / 3) < 0.04  # one flash on a third of them
    row = tool.row_for("keeper", 0, SPAN, right, seen)
    if kinds is not None:
        assert np.allclose([row[k] for k in tool.KINDS], kinds, atol=0.1), row
    for key, expected in (("last outvoted", last_out), ("first outvoted", first_out),
                          ("all in the first half", early)):
        if expected is not None:
            assert row[key] == pytest.approx(expected, abs=0.07), (key, row)
    if which == "late":  # right wherever a flash came late, never better than a guess where none did
        assert row["all"] > 0.7 and row["all in the first half"] < 0.6


def test_groups_of_episodes_and_bad_counts(load_tool):
    tool = load_tool("more_flashes_answers")
    assert tool.split_of({4: 1}) == (1, 1, False, False)
    assert tool.split_of({0: 0, 3: 1, 7: 1}) == (3, 2, False, True)
    assert tool.split_of({0: 1, 2: 1, 3: 0, 5: 0, 9: 0}) == (5, 3, False, True)
    assert tool.group_of({4: 0}, 10) == 4 and tool.group_of({5: 0}, 10) == 0  # a flash at frame 5 of 10 is late
    assert tool.group_of({0: 0, 3: 1, 7: 1}, 10) == 8 * 1 + 1
    assert tool.group_of({0: 1, 1: 0, 2: 1, 3: 1, 4: 0}, 10) == 8 * 3 + 4 + 2
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_group(Keeper("count"), {"span": SPAN}, episodes=episodes, num_envs=num_envs)
    with pytest.raises(ValueError, match="max_count <= 5"):
        tool.answers_by_group(Keeper("count"), {"span": SPAN, "max_count": 7}, episodes=4)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("more_flashes_answers", "gym:examples.more_flashes:MoreFlashes", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert 0.0 <= float(row["all"]) <= 1.0
    assert set(row) >= {"1", "3: 2-1", "5: 5-0", "last outvoted", "first outvoted"}


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/more_flashes.py's MoreFlashes"):
        load_tool("more_flashes_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
