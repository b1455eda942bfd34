"""examples/odd_or_even.py, the thirteenth user-written Gymnasium task: 1 .. max_count white flashes anywhere among
the span frames and nowhere else; the query pays only the parity of their number; every count and frame comes up,
odd and even evenly; bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_grey_query, is_white_flash, light_task_frames

_example = import_user_module("examples.odd_or_even")
LIGHT, QUERY, OddOrEven = _example.LIGHT, _example.QUERY, _example.OddOrEven

TASK = "gym:examples.odd_or_even:OddOrEven"


def test_flashes_among_the_span_frames_then_the_query_pays_only_their_parity():
    span, n = 9, 8
    venv, frames = light_task_frames(TASK, span, n, actions=2)
    odd = []
    for e in range(n):
        count = sum(is_white_flash(f[e], LIGHT) for f in frames)
        assert 1 <= count <= 6
        odd.append(count % 2)
    answer_the_grey_query(venv, odd, QUERY, span)


def test_every_count_and_frame_comes_up_and_odd_and_even_evenly():
    env = OddOrEven(span=8, max_count=6)
    counts, when, odd = [], set(), 0
    for seed in range(1200):
        env.reset(seed=seed)
        counts.append(len(env.flashes))
        when |= env.flashes
        odd += env.answer
        assert env.answer == len(env.flashes) % 2
    assert set(counts) == set(range(1, 7)) and when == set(range(8))
    assert min(np.bincount(counts)[1:]) > 150  # each count about 1/6 of the episodes
    assert abs(odd / 1200 - 0.5) < 0.05


@pytest.mark.parametrize("options, word", [({"max_count": 0}, "max_count"), ({"max_count": 5}, "even"),
                                           ({"span": 5}, "span"), ({"light": 0}, "light"),
                                           ({"light": 17}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        OddOrEven(**options)
