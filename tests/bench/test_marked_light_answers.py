"""tools/marked_light_answers.py: answers split by the mark's place among the lights and by a decoy of the marked
colour, stand-in agents that keep the marked, the first or the last light's colour or nothing, the probe's reads
of their states, and a real run's checkpoint played through the tool."""

import numpy as np
import pytest


class Keeper:
    """A stand-in agent that keeps one light's colour in its state, one-hot (``keep``: "marked", "first", "last" or
    "none") and names it at the query (a random colour where it kept none)."""

    def __init__(self, keep, seed=0):
        from r2ac.envs.gym_env import import_user_module

        example = import_user_module("examples.marked_light")
        self.keep, self.colours, self.ring, self.query = keep, example.COLOURS, example.RING, example.QUERY
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n):
        return np.zeros((n, 3))

    def act(self, obs, state, reward=None, done=None):
        assert obs.ndim == 4 and obs.shape[1] == 3 and obs.dtype == np.uint8
        state, action = state.copy(), self.rng.integers(3, size=len(obs))
        for e, frame in enumerate(obs):
            if (frame == self.query).all():
                if state[e].any():
                    action[e] = int(state[e].argmax())
                continue
            colour = next((c for c, rgb in enumerate(self.colours) if (frame == rgb[:, None, None]).all(axis=0).any()),
                          None)
            if colour is None:
                continue
            marked = (frame == self.ring).all(axis=0).any()
            if (self.keep == "marked" and marked) or (self.keep == "first" and not state[e].any()) \
                    or self.keep == "last":
                state[e] = np.eye(3)[colour]
        return action, state


@pytest.mark.parametrize("keep, expected", [("marked", (1, 1, 1, 1)), ("first", (1, 1 / 3, 1 / 3, 1 / 3)),
                                            ("last", (1 / 3, 1 / 3, 1 / 3, 1)), ("none", (1 / 3,) * 4)])
def test_what_is_kept_is_told_by_where_the_mark_came(load_tool, keep, expected):
    tool = load_tool("marked_light_answers")
    right, seen = tool.answers_by_group(Keeper(keep), {"span": 10}, episodes=2000, num_envs=50, seed=3)
    assert seen.sum() == 2000 and len(seen) == 4 * 3 ** 4
    row = tool.row_for("keeper", 0, 10, 4, right, seen)
    shares = [row[f"mark {k} of 4"] for k in range(1, 5)]
    assert np.allclose(shares, expected, atol=0.07), shares
    assert row["all"] == pytest.approx(np.mean(expected), abs=0.05)
    if keep in ("first", "last"):  # a decoy at the kept end has the marked colour only where some decoy has
        assert row["decoy of its colour"] > row["no decoy of its colour"] + 0.2


def test_groups_hold_the_colours_and_the_mark(load_tool):
    tool = load_tool("marked_light_answers")
    g = tool.group_of((2, 0, 1, 1), 3)
    colours, marked = tool.decode([g, tool.group_of((0, 0, 0, 0), 0)], 4)
    assert colours.tolist() == [[2, 0, 1, 1], [0, 0, 0, 0]] and marked.tolist() == [3, 0]
    assert {tool.group_of(c, m) for c in np.ndindex(3, 3, 3, 3) for m in range(4)} == set(range(4 * 81))


@pytest.mark.parametrize("keep, read", [("marked", "marked read"), ("first", "first read"), ("last", "last read")])
def test_the_probe_reads_the_colour_kept_in_the_state(load_tool, keep, read):
    tool = load_tool("marked_light_answers")
    record = {}
    tool.answers_by_group(Keeper(keep), {"span": 8}, episodes=1200, num_envs=60, seed=5, record=record)
    assert record["state"].shape == (1200, 3)
    cols = tool.probe_columns(record, 4)
    assert cols[read] > 0.97 and "marked read from outputs" not in cols  # a stand-in has no outputs
    others = [v for k, v in cols.items() if k != read]
    assert all(v < 0.8 for v in others), cols  # each other light is the kept one on a quarter of the episodes


def test_a_trained_runs_checkpoint_plays_through_the_tool_with_the_probe(probed_row):
    row = probed_row("marked_light_answers", "gym:examples.marked_light:MarkedLight", "{span: 6, lights: 2}",
                     too_few=12)
    assert row["span"] == "6" and row["episodes"] == "120" and "mark 3 of 4" not in row
    assert all(0.0 <= float(row[k]) <= 1.0 for k in ("mark 1 of 2", "mark 2 of 2", "all", "marked read",
                                                     "first read", "last read", "marked read from outputs"))


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/marked_light.py's MarkedLight"):
        load_tool("marked_light_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
