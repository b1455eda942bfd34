"""examples/spark_quadrant.py, the seventh user-written Gymnasium task: one spark on one frame among the span
frames, inside the quadrant the query pays, at any frame, any place of a quadrant and in any colour; bad options
are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_grey_query, span_frames, square_quadrant

_example = import_user_module("examples.spark_quadrant")
COLOURS, QUERY, SparkQuadrant = _example.COLOURS, _example.QUERY, _example.SparkQuadrant


def spark_quadrant(frame: np.ndarray):
    """The quadrant of the one 2 x 2 spark on a (3, 10, 10) frame, or None for a black frame."""
    return square_quadrant(frame, COLOURS)


def test_one_spark_then_the_query_pays_only_its_quadrant():
    span, n = 6, 8
    venv = make_vec_env("gym:examples.spark_quadrant:SparkQuadrant", n, 0, span=span, size=10, spark=2)
    assert venv.observation_shape == (3, 10, 10) and venv.num_actions == 4
    frames = span_frames(venv, span)
    quadrants = []
    for e in range(n):
        shown = [q for q in (spark_quadrant(f[e]) for f in frames) if q is not None]
        assert len(shown) == 1
        quadrants.append(shown[0])
    answer_the_grey_query(venv, quadrants, QUERY, span, actions=4)


def test_every_frame_quadrant_colour_and_corner_comes_up():
    env = SparkQuadrant(span=5, size=8, spark=2)
    when, quadrants, colours, corners = set(), set(), set(), set()
    for seed in range(400):
        env.reset(seed=seed)
        when.add(env.when)
        quadrants.add(env.quadrant)
        colours.add(env.colour)
        corners.add((env.place[0] % 4, env.place[1] % 4))
    assert when == set(range(5)) and quadrants == set(range(4)) and colours == set(range(len(COLOURS)))
    assert corners == {(y, x) for y in range(3) for x in range(3)}  # every place a 2 x 2 spark fits in a 4 x 4 quadrant


@pytest.mark.parametrize("options, word", [({"span": 0}, "span"), ({"spark": 0}, "spark"),
                                           ({"spark": 9}, "spark"), ({"size": 7}, "size")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        SparkQuadrant(**options)
