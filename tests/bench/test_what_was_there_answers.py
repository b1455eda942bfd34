"""tools/what_was_there_answers.py: answers split by the place the pointer shows, the count of squares kept, a
stand-in agent that keeps some squares and not others, and a real run's checkpoint played through the tool."""

import numpy as np
import pytest


class Keeper:
    """A stand-in agent that reads the squares' colours off the first frame and keeps those at ``places``: at
    the query it names the kept square's colour, and guesses for the others."""

    def __init__(self, places, seed=0):
        from examples.what_was_there import PALETTE, WhatWasThere

        self.places, self.palette, self.env = set(places), PALETTE, WhatWasThere()
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return {"colours": None, "n": n}

    def act(self, obs, state, reward=None, done=None):
        env, n = self.env, state["n"]
        assert obs.shape == (n, 3, 16, 16) and obs.dtype == np.uint8
        if state["colours"] is None:  # the first frame: each square's colour, read at its top-left pixel
            pix = obs[:, :, env.y, list(env.xs)].transpose(0, 2, 1)  # [n, items, 3]
            state = {"colours": (pix[:, :, None, :] == self.palette[None, None]).all(-1).argmax(-1), "n": n}
        action = self.rng.integers(env.n_colours, size=n)
        below = obs[:, 0, env.y + env.side + 1, list(env.xs)] == 255  # the pointer, on the query frame
        for e, place in zip(*np.nonzero(below)):
            if place in self.places:
                action[e] = state["colours"][e, place]
        return action, state


@pytest.mark.parametrize("places", [(), (0,), (0, 2), (0, 1, 2)])
def test_the_places_kept_are_the_places_answered(load_tool, places):
    tool = load_tool("what_was_there_answers")
    right, seen = tool.answers_by_place(Keeper(places), {"span": 3}, episodes=1200, num_envs=64, seed=5)
    assert seen.sum() == 1200 and all(abs(n / 1200 - 1 / 3) < 0.05 for n in seen)  # the pointer: uniform
    shares = right / seen
    for place in range(3):
        if place in places:
            assert shares[place] == 1.0
        else:
            assert abs(shares[place] - 0.25) < 0.07  # a guess among 4 colours
    assert abs(tool.kept(shares, 4) - len(places)) < 0.2


def test_kept_counts_the_way_from_chance_to_always_right(load_tool):
    kept = load_tool("what_was_there_answers").kept
    assert kept([1.0, 1.0, 0.25], 4) == 2.0
    assert kept([0.1, 0.25, 0.625], 4) == 0.5  # below chance counts 0
    assert kept([0.5, 0.5], 2) == 0.0


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("what_was_there_answers", "gym:examples.what_was_there:WhatWasThere", 60)
    assert row["span"] == "3" and row["episodes"] == "60"
    assert 0.0 <= float(row["all"]) <= 1.0 and 0.0 <= float(row["kept"]) <= 3.0
    assert set(row) >= {"place 0", "place 1", "place 2"}


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/what_was_there.py's WhatWasThere"):
        load_tool("what_was_there_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
