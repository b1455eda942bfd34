"""tools/same_place_answers.py: the relations of the test quadrant to the sample's, the bookkeeping of right
answers per relation, and a real run's checkpoint played through it."""

import numpy as np
import pytest


class Always:
    """A stand-in policy that gives one answer everywhere."""

    def __init__(self, answer):
        self.answer = answer

    def initial_state(self, n):
        return n

    def act(self, obs, state, reward=None, done=None):
        assert obs.shape == (state, 3, 16, 16) and obs.dtype == np.uint8
        return np.full(state, self.answer), state


def test_relations(load_tool):
    tool = load_tool("same_place_answers")
    # quadrants 0 top left, 1 top right, 2 bottom left, 3 bottom right
    table = {(0, 0): 0, (0, 1): 1, (0, 2): 2, (0, 3): 3, (3, 2): 1, (3, 1): 2, (3, 0): 3, (1, 2): 3, (2, 0): 2}
    assert {k: tool.relation(*k) for k in table} == table


@pytest.mark.parametrize("answer", [0, 1])
def test_one_answer_everywhere_is_right_exactly_where_it_should_be(load_tool, answer):
    tool = load_tool("same_place_answers")
    counts = tool.answers_by_relation(Always(answer), span=4, episodes=600, num_envs=64, seed=3)
    assert sum(n for _, n in counts.values()) == 600
    right = {k: r / n for k, (r, n) in counts.items()}
    assert right == ({"same": 1.0, "same row": 0.0, "same column": 0.0, "diagonal": 0.0} if answer == 0 else
                     {"same": 0.0, "same row": 1.0, "same column": 1.0, "diagonal": 1.0})
    assert abs(counts["same"][1] / 600 - 0.5) < 0.07  # same half the time, each other quadrant a sixth
    assert all(abs(counts[k][1] / 600 - 1 / 6) < 0.05 for k in ("same row", "same column", "diagonal"))


def test_a_trained_runs_checkpoint_plays_through_the_tool(played_row):
    row = played_row("same_place_answers", "gym:examples.same_place:SamePlace", 50)
    assert row["span"] == "3" and row["episodes"] == "50" and 0.0 <= float(row["all"]) <= 1.0


def test_a_run_of_another_task_is_refused_by_name(load_tool, tiny_run):
    with pytest.raises(ValueError, match="not examples/same_place.py's SamePlace"):
        load_tool("same_place_answers").main([str(tiny_run("cue", "{span: 3}")), "--episodes", "4"])
