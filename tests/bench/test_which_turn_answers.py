"""tools/which_turn_answers.py: answers split by the turn asked for, stand-in agents that keep the first and the
last colour, only the first, or no order, and a real run's checkpoint played through the tool."""

import numpy as np
import pytest


class Keeper:
    """A stand-in agent that keeps the colours it is told to (``keep``: a subset of {"first", "last"}) in its state,
    and nothing else, and at the query names the turn of the asked colour where what it kept tells it, and guesses
    among the turns left otherwise."""

    def __init__(self, keep, seed=0):
        from r2ac.envs.gym_env import import_user_module

        example = import_user_module("examples.which_turn")
        self.keep, self.colours, self.query = set(keep), example.COLOURS, example.QUERY
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 2, 3))  # the first colour and the last seen so far, where kept, one-hot

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state, action = state.copy(), self.rng.integers(3, size=len(obs))
        for e, frame in enumerate(obs):
            colour = next((c for c, rgb in enumerate(self.colours) if (frame == rgb[:, None, None]).all(axis=0).any()),
                          None)
            first, last = (int(s.argmax()) if s.any() else -1 for s in state[e])
            if (frame == self.query).any():  # the query: the colour shown is the one asked for
                if colour == first:
                    action[e] = 0
                elif colour == last:
                    action[e] = 2
                else:
                    action[e] = self.rng.choice([t for t, kept in ((0, first), (1, -1), (2, last)) if kept < 0])
            elif colour is not None:
                if "first" in self.keep and first < 0:
                    state[e, 0, colour] = 1
                if "last" in self.keep:
                    state[e, 1] = np.eye(3)[colour]
        return action, state


@pytest.mark.parametrize("keep, expected", [(("first", "last"), (1, 1, 1)), (("first",), (1, 0.5, 0.5)),
                                            (("last",), (0.5, 0.5, 1)), ((), (1 / 3,) * 3)])
def test_what_is_kept_of_the_order_is_told_by_the_turns_answered(load_tool, keep, expected):
    tool = load_tool("which_turn_answers")
    right, seen = tool.answers_by_turn(Keeper(keep), {"span": 12}, episodes=1500, num_envs=50, seed=3)
    assert seen.sum() == 1500 and all(abs(s / 1500 - 1 / 3) < 0.05 for s in seen)
    shares = right / seen
    assert np.allclose(shares, expected, atol=0.07), shares
    row = tool.row_for("keeper", 0, 12, right, seen)
    assert row["ends"] == pytest.approx((expected[0] + expected[2]) / 2, abs=0.06)
    assert row["all"] == pytest.approx(sum(expected) / 3, abs=0.05)


@pytest.mark.parametrize("keep, expected", [(("first", "last"), (1, 1, 1)), (("first",), (1, 0.5, 0.5)),
                                            (("last",), (0.5, 0.5, 1)), ((), (1 / 3,) * 3)])
def test_the_probe_reads_the_colours_kept_in_the_state(load_tool, keep, expected):
    """Kept first and last, the second is read too (it is the colour left); kept one, the other two at 1/2."""
    tool = load_tool("which_turn_answers")
    record = {}
    tool.answers_by_turn(Keeper(keep), {"span": 8}, episodes=1200, num_envs=60, seed=5, record=record)
    assert record["state"].shape == (1200, 6) and record["group"].max() < 18
    cols = tool.probe_columns(record)
    reads = [cols[f"{turn} read"] for turn in ("first", "second", "third")]
    assert np.allclose(reads, expected, atol=0.07), reads
    assert 0.0 <= cols["turn read"] <= 1.0 and "turn read from outputs" not in cols  # a stand-in has no outputs


def test_groups_hold_the_order_and_the_turn(load_tool):
    tool = load_tool("which_turn_answers")
    groups = {tool.group_of(order, turn) for order in tool.ORDERS for turn in range(3)}
    assert groups == set(range(18)) and tool.group_of((2, 0, 1), 1) == 3 * tool.ORDERS.index((2, 0, 1)) + 1


def test_bad_counts_are_refused(load_tool):
    tool = load_tool("which_turn_answers")
    for episodes, num_envs in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="episodes and num_envs must be >= 1"):
            tool.answers_by_turn(Keeper(()), {"span": 12}, episodes=episodes, num_envs=num_envs)


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("which_turn_answers", "gym:examples.which_turn:WhichTurn", 60, "{span: 8}")
    assert row["span"] == "8" and row["episodes"] == "60"
    assert 0.0 <= float(row["all"]) <= 1.0 and 0.0 <= float(row["ends"]) <= 1.0
    assert set(row) >= {"first", "second", "third"}


def test_a_trained_runs_state_is_probed_and_too_few_episodes_refused(probed_row):
    row = probed_row("which_turn_answers", "gym:examples.which_turn:WhichTurn", "{span: 6}", too_few=12)
    assert all(0.0 <= float(row[f"{turn} read"]) <= 1.0 for turn in ("first", "second", "third", "turn"))
    assert 0.0 <= float(row["turn read from outputs"]) <= 1.0


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/which_turn.py's WhichTurn"):
        load_tool("which_turn_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
