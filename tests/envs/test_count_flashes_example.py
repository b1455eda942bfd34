"""examples/count_flashes.py, the fifth user-written Gymnasium task: the light flashes on as many frames as the
episode's count, anywhere among the span frames and nowhere else, every count comes up, the query pays only
the count, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, light_task_frames

_example = import_user_module("examples.count_flashes")
LIGHT, QUERY, CountFlashes = _example.LIGHT, _example.QUERY, _example.CountFlashes

TASK = "gym:examples.count_flashes:CountFlashes"


def lit(frame: np.ndarray) -> int:
    """The number of light pixels in a (3, H, W) frame."""
    return int((frame == LIGHT[:, None, None]).all(axis=0).sum())


def test_the_light_flashes_count_times_among_the_span_frames_then_the_query_pays_only_the_count():
    span, n = 6, 8
    venv, frames = light_task_frames(TASK, span, n)
    wrong = np.zeros(n, int)
    counts = []
    for e in range(n):
        shown = [lit(f[e]) for f in frames]
        assert all(s in (0, 4) for s in shown)  # black, or one 2x2 light on black
        assert all(f[e].any() == (s > 0) for f, s in zip(frames, shown))
        counts.append(sum(s > 0 for s in shown))
    assert all(1 <= c <= 3 for c in counts)
    obs, reward, done, _ = venv.step(wrong)  # the query: a grey frame
    assert (obs == QUERY).all() and not reward.any() and not done.any()
    right = np.array(counts) - 1
    answer_the_query(venv, right, (right + 1) % 3, episode_length=span + 1)


def test_every_count_comes_up_and_a_flash_can_come_on_any_frame():
    env = CountFlashes(span=5, max_count=4)
    counts, when = set(), set()
    for seed in range(200):
        env.reset(seed=seed)
        counts.add(env.count)
        when |= env.flashes
        assert len(env.flashes) == env.count
    assert counts == {1, 2, 3, 4} and when == set(range(5))


@pytest.mark.parametrize("options, word", [({"max_count": 1}, "max_count"), ({"span": 2}, "span"),
                                           ({"light": 0}, "light"), ({"light": 40}, "light")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        CountFlashes(**options)
