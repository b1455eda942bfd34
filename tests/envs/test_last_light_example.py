"""examples/last_light.py, the tenth user-written Gymnasium task: 1-3 lights among the first half of the span
frames and nowhere else, no two in a row of one colour, the query pays only the last light's colour, every
count, colour and frame of the window comes up, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, light_colour, light_task_frames

_example = import_user_module("examples.last_light")
COLOURS, QUERY, LastLight = _example.COLOURS, _example.QUERY, _example.LastLight

TASK = "gym:examples.last_light:LastLight"


def test_lights_in_the_window_then_the_query_pays_only_the_last_colour():
    span, n = 8, 8
    venv, frames = light_task_frames(TASK, span, n)
    wrong = np.zeros(n, int)
    lasts, firsts = [], []
    for e in range(n):
        shown = [(t, light_colour(f[e], COLOURS)) for t, f in enumerate(frames)]
        lights = [(t, c) for t, c in shown if c is not None]
        assert 1 <= len(lights) <= 3 and all(t < span // 2 for t, _ in lights)  # only in the window
        assert all(a[1] != b[1] for a, b in zip(lights, lights[1:]))  # never one colour twice in a row
        lasts.append(lights[-1][1])
        firsts.append(lights[0][1])
    obs, reward, done, _ = venv.step(wrong)  # the query: a grey frame
    assert (obs == QUERY).all() and not reward.any() and not done.any()
    lasts = np.array(lasts)
    answer_the_query(venv, lasts, (lasts + 1) % 3, episode_length=span + 1)


def test_every_count_colour_and_window_frame_comes_up_and_the_last_is_the_answer():
    env = LastLight(span=10, window=4)
    counts, colours, when = set(), set(), set()
    first_is_not_last = 0
    for seed in range(300):
        env.reset(seed=seed)
        counts.add(len(env.lights))
        colours.add(env.answer)
        when |= set(env.lights)
        assert env.answer == env.lights[max(env.lights)]
        first_is_not_last += env.lights[min(env.lights)] != env.answer
    assert counts == {1, 2, 3} and colours == {0, 1, 2} and when == set(range(4))
    assert first_is_not_last > 100  # keeping the first light is wrong in many episodes


def test_the_window_defaults_to_half_the_span():
    assert LastLight(span=150).window == 75 and LastLight(span=150, window=20).window == 20


@pytest.mark.parametrize("options, word", [({"max_count": 0}, "max_count"), ({"span": 4}, "window"),
                                           ({"window": 2}, "window"), ({"window": 200}, "window"),
                                           ({"light": 0}, "light"), ({"light": 40}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        LastLight(**options)
