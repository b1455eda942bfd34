"""examples/what_was_there.py, the ninth user-written Gymnasium task (delayed cued recall): three coloured squares on
the first frame, black frames, then a grey query frame with a pointer under one square's place; the query pays
naming that square's colour. Every place is cued and every colour drawn alike; bad options are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, span_frames

_example = import_user_module("examples.what_was_there")
PALETTE, QUERY, POINTER, WhatWasThere = _example.PALETTE, _example.QUERY, _example.POINTER, _example.WhatWasThere


def squares_left_to_right(frame: np.ndarray, env: WhatWasThere) -> list:
    """The palette index of each square on a (3, size, size) first frame, read at the env's places; the rest black."""
    s, y, seen = env.side, env.y, []
    rest = frame.copy()
    for x in env.xs:
        patch = frame[:, y:y + s, x:x + s].reshape(3, -1)
        assert (patch == patch[:, :1]).all()  # one colour per square
        seen.append(int(np.flatnonzero((PALETTE == patch[:, 0]).all(1))[0]))
        rest[:, y:y + s, x:x + s] = 0
    assert not rest.any()
    return seen


def pointed_place(frame: np.ndarray, env: WhatWasThere) -> int:
    """The place (0, 1, 2, ...) the query frame's white bar lies under; the rest of the frame grey."""
    white = (frame == POINTER).all(0)
    ys, xs = np.nonzero(white)
    assert len(ys) == 2 * env.side and set(ys) == {env.y + env.side + 1, env.y + env.side + 2}
    place = env.xs.index(int(xs.min()))
    assert xs.max() == env.xs[place] + env.side - 1
    assert (frame[:, ~white] == QUERY).all()
    return place


def test_squares_black_frames_then_a_pointer_and_the_answer_pays():
    span, n = 5, 8
    venv = make_vec_env("gym:examples.what_was_there:WhatWasThere", n, 0, span=span, size=12, items=3)
    assert venv.observation_shape == (3, 12, 12) and venv.num_actions == 4
    env = WhatWasThere(span=span, size=12, items=3)  # the same geometry as the vector env's
    frames = span_frames(venv, span)
    colours = [squares_left_to_right(frames[0][e], env) for e in range(n)]
    assert all(not f.any() for f in frames[1:])  # black between the squares and the query
    obs, reward, done, _ = venv.step(np.zeros(n, int))  # the query frame
    assert not reward.any() and not done.any()
    right = np.array([colours[e][pointed_place(obs[e], env)] for e in range(n)])
    answer_the_query(venv, right, (right + 1) % 4, episode_length=span + 1)


def test_every_place_cued_and_every_colour_drawn_alike_on_their_own():
    env = WhatWasThere(span=2, size=16, items=3, colours=4)
    assert env.xs == (0, 5, 10) and env.side == 4
    cued, colours = [], []
    for seed in range(3000):
        env.reset(seed=seed)
        cued.append(env.cued)
        colours.append(env.colours)
    assert np.allclose(np.bincount(cued, minlength=3) / 3000, 1 / 3, atol=0.03)
    colours = np.array(colours)
    for place in range(3):
        assert np.allclose(np.bincount(colours[:, place], minlength=4) / 3000, 1 / 4, atol=0.03)
    same = (colours[:, 0] == colours[:, 1]).mean()
    assert abs(same - 1 / 4) < 0.03  # drawn on their own: two squares share a colour a quarter of the time


@pytest.mark.parametrize("options, word", [({"span": 0}, "span"), ({"size": 6}, "size"), ({"items": 1}, "items"),
                                           ({"items": 6}, "items"), ({"colours": 5}, "colours")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhatWasThere(**options)
