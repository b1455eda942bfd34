"""tools/how_long_ago_answers.py: answers split by the tenth of the span the flash came in; stand-in agents with a
true clock, a clock off by a tenth, one that sees only recent flashes, and none; a real run's checkpoint played
through the tool."""

import numpy as np
import pytest

SPAN = 40


class Timer:
    """A stand-in agent that counts the frames since the flash and at the query says "late" when fewer than
    ``cut`` (a share of the span) have passed: ``cut`` 0.5 is a true clock, 0.4 one that calls the flashes of
    the sixth tenth early, ``recent`` only "late" when the flash came in the last 10 frames; ``None`` guesses."""

    def __init__(self, cut, seed=0):
        self.cut = cut
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.full(n, -1)  # frames since the flash, -1 before it

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        lit = obs[:, 0].max(axis=(1, 2)) == 255
        state = np.where(lit, 0, np.where(state >= 0, state + 1, -1))
        if self.cut is None:
            return self.rng.integers(2, size=len(obs)), state
        cut = 10 if self.cut == "recent" else self.cut * SPAN
        return (np.logical_and(state >= 0, state <= cut)).astype(int), state


@pytest.mark.parametrize("cut, tenths, near, recent", [
    (0.5, (1,) * 10, 1, 1), (0.4, (1,) * 5 + (0,) + (1,) * 4, 0.5, 1),
    ("recent", (1,) * 5 + (0, 0, 0.5, 1, 1), 0.5, 1), (None, (0.5,) * 10, 0.5, 0.5)])
def test_how_sharp_the_clock_is_is_told_by_the_tenths(load_tool, cut, tenths, near, recent):
    tool = load_tool("how_long_ago_answers")
    right, seen = tool.answers_by_group(Timer(cut), {"span": SPAN}, episodes=1000, num_envs=100, seed=3)
    assert seen.sum() == 1000 and (seen.reshape(10, 2).sum(axis=1) > 70).all()  # every tenth comes up
    row = tool.row_for("timer", 0, SPAN, right, seen)
    assert np.allclose([row[t] for t in tool.TENTHS], tenths, atol=0.1), row
    assert row["near the middle"] == pytest.approx(near, abs=0.07)
    assert row["last 10 frames"] == pytest.approx(recent, abs=0.1)
    assert row["all"] == pytest.approx(np.mean(tenths), abs=0.05)
    if cut == "recent":
        assert row["early"] == 1 and row["late"] == pytest.approx(0.5, abs=0.08)  # frames 30-39 of the late 20


def test_groups_of_episodes_and_bad_counts(load_tool):
    tool = load_tool("how_long_ago_answers")
    assert tool.group_of(0, 150) == 0 and tool.group_of(14, 150) == 0 and tool.group_of(15, 150) == 2
    assert tool.group_of(139, 150) == 18 and tool.group_of(140, 150) == 19 and tool.group_of(149, 150) == 19
    assert tool.group_of(35, 40) == 17 and tool.group_of(29, 40) == 14
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_group(Timer(0.5), {"span": SPAN}, episodes=episodes, num_envs=num_envs)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("how_long_ago_answers", "gym:examples.how_long_ago:HowLongAgo", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert 0.0 <= float(row["all"]) <= 1.0
    assert set(row) >= {"0-10%", "90-100%", "near the middle", "last 10 frames", "early", "late"}


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/how_long_ago.py's HowLongAgo"):
        load_tool("how_long_ago_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
