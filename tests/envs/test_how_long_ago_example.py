"""examples/how_long_ago.py, the twelfth user-written Gymnasium task: one white flash on one of the span frames, the
query pays only the half of the episode it came in; every frame of both halves comes up (none of the middle
``gap``); bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_grey_query, is_white_flash, light_task_frames

_example = import_user_module("examples.how_long_ago")
LIGHT, QUERY, HowLongAgo = _example.LIGHT, _example.QUERY, _example.HowLongAgo

TASK = "gym:examples.how_long_ago:HowLongAgo"


def test_one_flash_among_the_span_frames_then_the_query_pays_only_its_half():
    span, n = 9, 8
    venv, frames = light_task_frames(TASK, span, n, actions=2)
    late = []
    for e in range(n):
        when = [t for t, f in enumerate(frames) if is_white_flash(f[e], LIGHT)]
        assert len(when) == 1
        late.append(int(when[0] >= span - span // 2))
    answer_the_grey_query(venv, late, QUERY, span)


@pytest.mark.parametrize("span, gap, early, late", [(8, 0, range(0, 4), range(4, 8)),
                                                     (9, 0, range(0, 4), range(5, 9)),
                                                     (10, 4, range(0, 3), range(7, 10))])
def test_every_frame_of_each_half_comes_up_and_none_of_the_middle(span, gap, early, late):
    env = HowLongAgo(span=span, gap=gap)
    seen = {0: set(), 1: set()}
    for seed in range(300):
        env.reset(seed=seed)
        seen[env.answer].add(env.flash)
    assert seen[0] == set(early) and seen[1] == set(late)


def test_the_halves_come_up_evenly_and_the_flash_place_varies():
    env = HowLongAgo(span=20, size=8, light=2)
    answers, places = [], set()
    for seed in range(400):
        obs, _ = env.reset(seed=seed)
        answers.append(env.answer)
        for t in range(env.span):
            if t == env.flash:
                ys, xs = np.nonzero((obs == LIGHT).all(axis=-1))
                places.add((int(ys.min()), int(xs.min())))
            obs = env.step(0)[0]
    assert 0.42 < np.mean(answers) < 0.58
    assert len(places) > 30


@pytest.mark.parametrize("kwargs, words", [({"span": 1}, "span must be >= 2"),
                                           ({"span": 10, "gap": 9}, "gap must be in 0 .. span - 2"),
                                           ({"gap": -1}, "gap must be in"),
                                           ({"size": 4, "light": 5}, "light must be in 1 .. size")])
def test_bad_options_are_refused_by_name(kwargs, words):
    with pytest.raises(ValueError, match=words):
        HowLongAgo(**kwargs)
