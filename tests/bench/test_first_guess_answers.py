"""tools/first_guess_answers.py: first guesses and answers split by the hint, stand-in agents that keep the door
(their guess beside the hint), only the hint (guessing at random first, or always door 0) or nothing, the probe's
reads of their states, and a real run's checkpoint played through the tool."""

import numpy as np
import pytest


class Guesser:
    """A stand-in agent: a first guess at random (or always door 0, ``fixed``), then a state that keeps the right
    door one-hot (``keep="door"``: its own guess added to the hint), the hint one-hot (``"hint"``) or nothing
    (``"none"``); at the query it names the kept door, its usual first guess (door 0) plus the kept hint, or a door
    at random."""

    def __init__(self, keep, fixed=False, seed=0):
        from r2ac.envs.gym_env import import_user_module

        example = import_user_module("examples.first_guess")
        self.keep, self.fixed, self.example = keep, fixed, example
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        self.guesses = np.zeros(n, int)  # what it chose, known to it; its state keeps only what ``keep`` says
        return np.zeros((n, 3))

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        ex = self.example
        state, action = state.copy(), self.rng.integers(3, size=len(obs))
        for e, frame in enumerate(obs):
            if (frame == ex.GUESS).all():
                action[e] = 0 if self.fixed else action[e]
                self.guesses[e] = action[e]
            elif (frame == ex.QUERY).all():
                if self.keep == "door":
                    action[e] = int(state[e].argmax())
                elif self.keep == "hint":
                    action[e] = int(state[e].argmax()) % 3
            else:
                hint = next((k for k, rgb in enumerate(ex.HINTS) if (frame == rgb[:, None, None]).all()), None)
                if hint is not None and self.keep != "none":
                    state[e] = np.eye(3)[(self.guesses[e] + hint) % 3 if self.keep == "door" else hint]
        return action, state


@pytest.mark.parametrize("keep, fixed, right, wrong, first", [
    ("door", False, 1, 1, 1 / 3), ("hint", False, 1 / 3, 1 / 3, 1 / 3), ("hint", True, 1, 1, 1),
    ("none", False, 1 / 3, 1 / 3, 1 / 3)])
def test_the_answers_after_a_right_and_a_wrong_guess_tell_what_is_kept(load_tool, keep, fixed, right, wrong, first):
    tool = load_tool("first_guess_answers")
    got, seen = tool.answers_by_group(Guesser(keep, fixed), {"span": 6}, episodes=1800, num_envs=60, seed=3)
    assert seen.sum() == 1800 and len(seen) == 9
    row = tool.row_for("guesser", 0, 6, got, seen)
    assert row["after a right guess"] == pytest.approx(right, abs=0.07)
    assert row["after a wrong guess"] == pytest.approx(wrong, abs=0.07)
    assert row["first guess 0"] == pytest.approx(first, abs=0.05)
    assert sum(row[f"first guess {g}"] for g in range(3)) == pytest.approx(1.0)


def test_groups_hold_the_guess_and_the_hint(load_tool):
    tool = load_tool("first_guess_answers")
    guess, hint, door = tool.decode([tool.group_of(2, 0), tool.group_of(1, 2), tool.group_of(0, 1)])
    assert guess.tolist() == [2, 1, 0] and hint.tolist() == [0, 2, 1] and door.tolist() == [2, 0, 1]
    assert {tool.group_of(g, k) for g in range(3) for k in range(3)} == set(range(9))


@pytest.mark.parametrize("keep, read", [("door", "door read"), ("hint", "hint read")])
def test_the_probe_reads_what_the_state_keeps(load_tool, keep, read):
    tool = load_tool("first_guess_answers")
    record = {}
    tool.answers_by_group(Guesser(keep), {"span": 5}, episodes=1200, num_envs=60, seed=5, record=record)
    assert record["state"].shape == (1200, 3)
    cols = tool.probe_columns(record)
    assert cols[read] > 0.97 and "door read from outputs" not in cols  # a stand-in has no outputs
    others = [v for k, v in cols.items() if k != read]
    assert all(v < 0.45 for v in others), cols  # with the guess at random each of the others is a third apart


def test_a_trained_runs_checkpoint_plays_through_the_tool_with_the_probe(probed_row):
    row = probed_row("first_guess_answers", "gym:examples.first_guess:FirstGuess", "{span: 4}", too_few=12)
    assert row["span"] == "4" and row["episodes"] == "120"
    assert all(0.0 <= float(row[k]) <= 1.0 for k in ("first guess 0", "all", "after a right guess",
                                                     "after a wrong guess", "door read", "guess read", "hint read",
                                                     "door read from outputs"))


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/first_guess.py's FirstGuess"):
        load_tool("first_guess_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
