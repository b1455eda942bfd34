"""examples/same_place.py, the eighth user-written Gymnasium task (delayed match-to-sample): a spot on the first
frame, black frames, then a second spot on a grey test frame; the test pays whether the two shared a quadrant.
Same and not same come up half the time each, at any place and in any colour; bad options are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, span_frames, square_quadrant

_example = import_user_module("examples.same_place")
COLOURS, TEST, SamePlace = _example.COLOURS, _example.TEST, _example.SamePlace


def spot_quadrant(frame: np.ndarray, background: int):
    """The quadrant of the one 3 x 3 spot on a (3, 10, 10) frame of that background, or None if there is none."""
    return square_quadrant(frame, COLOURS, background, side=3)


def test_a_sample_black_frames_then_a_test_that_pays_same_or_not():
    span, n = 5, 8
    venv = make_vec_env("gym:examples.same_place:SamePlace", n, 0, span=span, size=10, spot=3)
    assert venv.observation_shape == (3, 10, 10) and venv.num_actions == 2
    frames = span_frames(venv, span)
    samples = [spot_quadrant(frames[0][e], 0) for e in range(n)]
    assert None not in samples
    assert all(not f.any() for f in frames[1:])  # black between sample and test
    obs, reward, done, _ = venv.step(np.zeros(n, int))  # the test frame
    assert not reward.any() and not done.any()
    tests = [spot_quadrant(obs[e], TEST) for e in range(n)]
    assert None not in tests
    right = np.array([int(s != t) for s, t in zip(samples, tests)])
    answer_the_query(venv, right, 1 - right, episode_length=span + 1)


def test_same_half_the_time_and_every_other_quadrant_a_sixth():
    env = SamePlace(span=3, size=8, spot=2)
    pairs, colours, corners = [], set(), set()
    for seed in range(3000):
        env.reset(seed=seed)
        pairs.append(env.quadrants)
        colours.update(env.colours)
        corners.update((p[0] % 4, p[1] % 4) for p in env.places)
    pairs = np.array(pairs)
    same = pairs[:, 0] == pairs[:, 1]
    assert abs(same.mean() - 0.5) < 0.04
    assert set(pairs[:, 0]) == set(range(4))
    counts = np.bincount(4 * pairs[~same, 0] + pairs[~same, 1], minlength=16).reshape(4, 4)
    assert (np.diag(counts) == 0).all()
    off = counts[~np.eye(4, dtype=bool)] / len(pairs)
    assert np.allclose(off, 1 / 24, atol=0.012)  # each (sample, other quadrant) pair: 1/4 * 1/2 * 1/3
    assert colours == set(range(len(COLOURS)))
    assert corners == {(y, x) for y in range(3) for x in range(3)}  # every place a 2 x 2 spot fits in a 4 x 4 quadrant


@pytest.mark.parametrize("options, word", [({"span": 0}, "span"), ({"spot": 0}, "spot"),
                                           ({"spot": 9}, "spot"), ({"size": 7}, "size")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        SamePlace(**options)
