"""examples/which_first.py, the sixth user-written Gymnasium task: two lights of different colours on two frames
among the span frames and nowhere else, the query pays only the first light's colour, every order of colours and
every frame comes up, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, light_colour, light_task_frames

_example = import_user_module("examples.which_first")
COLOURS, QUERY, WhichFirst = _example.COLOURS, _example.QUERY, _example.WhichFirst

TASK = "gym:examples.which_first:WhichFirst"


def test_two_lights_of_two_colours_then_the_query_pays_only_the_first_colour():
    span, n = 6, 8
    venv, frames = light_task_frames(TASK, span, n)
    wrong = np.zeros(n, int)
    firsts, seconds = [], []
    for e in range(n):
        shown = [c for c in (light_colour(f[e], COLOURS) for f in frames) if c is not None]
        assert len(shown) == 2 and shown[0] != shown[1]
        firsts.append(shown[0])
        seconds.append(shown[1])
    obs, reward, done, _ = venv.step(wrong)  # the query: a grey frame
    assert (obs == QUERY).all() and not reward.any() and not done.any()
    answer_the_query(venv, np.array(firsts), np.array(seconds), episode_length=span + 1)


def test_every_ordered_pair_of_colours_comes_up_and_a_light_can_come_on_any_frame():
    env = WhichFirst(span=5)
    pairs, when = set(), set()
    for seed in range(300):
        env.reset(seed=seed)
        pairs.add(env.colours)
        when |= set(env.times)
        assert env.times[0] < env.times[1] and env.colours[0] != env.colours[1]
    assert pairs == {(a, b) for a in range(3) for b in range(3) if a != b} and when == set(range(5))


@pytest.mark.parametrize("options, word", [({"span": 1}, "span"), ({"light": 0}, "light"),
                                           ({"light": 40}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhichFirst(**options)
