"""examples/marked_light.py, the fifteenth user-written Gymnasium task: `lights` lights of random colours on as many
frames among the span frames and nowhere else, exactly one of them ringed in white, a grey query, and the query pays
only the marked light's colour; every place of the mark among the lights and every colour comes up; bad options are
refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_grey_query, span_frames

_example = import_user_module("examples.marked_light")
COLOURS, QUERY, RING, MarkedLight = _example.COLOURS, _example.QUERY, _example.RING, _example.MarkedLight

TASK = "gym:examples.marked_light:MarkedLight"


def read_light(frame: np.ndarray):
    """(colour, marked) of the one light on a (3, 10, 10) frame with 2x2 lights, or None for a black frame; asserts
    the frame is one whole light on black, ringed (a white 4x4 box around it) or not."""
    if not frame.any():
        return None
    for c, rgb in enumerate(COLOURS):
        lit = (frame == rgb[:, None, None]).all(axis=0)
        if not lit.any():
            continue
        ys, xs = np.nonzero(lit)
        assert lit.sum() == 4 and np.ptp(ys) == 1 and np.ptp(xs) == 1
        ring = (frame == RING).all(axis=0)
        if not ring.any():
            assert (frame[:, ~lit] == 0).all()
            return c, False
        box = np.zeros_like(lit)
        box[ys.min() - 1:ys.max() + 2, xs.min() - 1:xs.max() + 2] = True
        assert (ring == (box & ~lit)).all() and (frame[:, ~box] == 0).all()  # a one-pixel ring and black elsewhere
        return c, True
    raise AssertionError("a frame that is neither black nor a light")


def test_lights_with_one_marked_then_a_grey_query_that_pays_only_the_marked_lights_colour():
    from r2ac.envs import make_vec_env

    span, n = 9, 8
    venv = make_vec_env(TASK, n, 0, span=span, size=10, light=2, lights=4)
    assert venv.observation_shape == (3, 10, 10) and venv.num_actions == 3
    frames = span_frames(venv, span)
    answers = []
    for e in range(n):
        shown = [s for s in (read_light(f[e]) for f in frames) if s is not None]
        assert len(shown) == 4 and sum(marked for _, marked in shown) == 1
        answers.append(next(c for c, marked in shown if marked))
    answer_the_grey_query(venv, answers, QUERY, span, actions=3)


def test_every_place_of_the_mark_and_every_colour_comes_up_and_the_answer_is_the_marked_colour():
    env = MarkedLight(span=6, lights=4)
    places, when, colours, answers, shared = [], set(), [], [], []
    for seed in range(600):
        env.reset(seed=seed)
        assert len(env.times) == 4 and list(env.times) == sorted(set(env.times))
        places.append(env.marked)
        when |= set(env.times)
        colours += list(env.colours)
        answers.append(env.answer)
        shared.append(any(c == env.answer for k, c in enumerate(env.colours) if k != env.marked))
        assert env.answer == env.colours[env.marked]
    assert when == set(range(6))
    for values, k in ((places, 4), (colours, 3), (answers, 3)):
        assert all(abs(np.mean(np.array(values) == v) - 1 / k) < 0.08 for v in range(k))
    # colours are drawn light by light: some decoy has the marked one's colour on 1 - (2/3)^3 = 0.70 of the episodes
    assert abs(np.mean(shared) - (1 - (2 / 3) ** 3)) < 0.06


def test_a_marked_light_on_full_size_frames_and_the_query():
    env = MarkedLight(span=2, size=16, light=3, lights=1)
    frame, _ = env.reset(seed=3)
    if not frame.any():
        frame, reward, done, _, _ = env.step(0)
        assert reward == 0.0 and not done
    ring = (frame == RING).all(axis=-1)
    centre = (frame == COLOURS[env.answer]).all(axis=-1)
    assert ring.sum() == 25 - 9 and centre.sum() == 9
    while env.t < env.span:
        frame, reward, done, _, _ = env.step(0)
        assert reward == 0.0 and not done
    assert (frame == QUERY).all()
    _, reward, done, _, _ = env.step(env.answer)
    assert reward == 1.0 and done


@pytest.mark.parametrize("options, word", [({"lights": 0}, "lights"), ({"span": 3, "lights": 4}, "span"),
                                           ({"light": 0}, "light"), ({"light": 15}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        MarkedLight(**options)
