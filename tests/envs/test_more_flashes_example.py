"""examples/more_flashes.py, the eleventh user-written Gymnasium task: an odd number of white flashes, each in one
half of the frame, anywhere among the span frames and nowhere else; the query pays only the side that flashed
more; every count, side, margin and frame comes up; bad options are refused."""

import numpy as np
import pytest

from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_grey_query, light_task_frames

_example = import_user_module("examples.more_flashes")
LIGHT, QUERY, MoreFlashes = _example.LIGHT, _example.QUERY, _example.MoreFlashes

TASK = "gym:examples.more_flashes:MoreFlashes"


def flash_side(frame: np.ndarray):
    """The side (0 left, 1 right) of the one white 2x2 flash on a black (3, 10, 10) frame, None on a black frame."""
    if not frame.any():
        return None
    lit = (frame == LIGHT).all(axis=0)
    ys, xs = np.nonzero(lit)
    assert lit.sum() == 4 and np.ptp(ys) == 1 and np.ptp(xs) == 1 and (frame[:, ~lit] == 0).all()
    assert xs.min() // 5 == xs.max() // 5  # inside one half
    return int(xs[0] // 5)


def test_flashes_among_the_span_frames_then_the_query_pays_only_the_side_with_more():
    span, n = 9, 8
    venv, frames = light_task_frames(TASK, span, n, actions=2)
    majority = []
    for e in range(n):
        sides = [s for s in (flash_side(f[e]) for f in frames) if s is not None]
        assert len(sides) in (1, 3, 5)
        majority.append(int(2 * sum(sides) > len(sides)))
    answer_the_grey_query(venv, majority, QUERY, span)


def test_every_count_side_margin_and_frame_comes_up():
    env = MoreFlashes(span=6, max_count=5)
    counts, answers, margins, when = set(), set(), set(), set()
    last_in_minority = 0
    for seed in range(400):
        env.reset(seed=seed)
        sides = [env.flashes[t] for t in sorted(env.flashes)]
        counts.add(len(sides))
        answers.add(env.answer)
        margins.add(abs(2 * sum(sides) - len(sides)))
        when |= set(env.flashes)
        assert env.answer == int(sum(sides) > len(sides) / 2)
        last_in_minority += sides[-1] != env.answer
    assert counts == {1, 3, 5} and answers == {0, 1} and margins == {1, 3, 5} and when == set(range(6))
    assert last_in_minority > 40  # keeping the last flash's side is wrong in many episodes


def test_a_window_keeps_every_flash_on_its_first_frames():
    assert MoreFlashes(span=150).window == 150
    env = MoreFlashes(span=20, window=6)
    when = set()
    for seed in range(200):
        env.reset(seed=seed)
        when |= set(env.flashes)
    assert when == set(range(6))


def test_the_answer_is_the_side_with_more():
    env = MoreFlashes(span=10)
    for flashes, answer in (({3: 1}, 1), ({0: 0, 4: 1, 9: 0}, 0), ({1: 1, 2: 1, 5: 0, 6: 0, 8: 1}, 1)):
        env.flashes = flashes
        assert env.answer == answer


@pytest.mark.parametrize("options, word", [({"max_count": 0}, "max_count"), ({"max_count": 4}, "odd"),
                                           ({"span": 4}, "span"), ({"light": 0}, "light"),
                                           ({"light": 9}, "light"), ({"window": 4}, "window"),
                                           ({"window": 151}, "window")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        MoreFlashes(**options)
