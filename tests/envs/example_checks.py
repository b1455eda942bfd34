"""Checks shared by the tests of the example tasks (examples/): an episode's frames, the query step, and the rate of
distractors."""

import numpy as np


def span_frames(venv, span: int) -> list:
    """Reset the vector env and step it through an episode's ``span`` frames with action 0 (nothing may pay or
    end there); return the ``span`` observations, the reset's first."""
    frames = [venv.reset()]
    for _ in range(span - 1):
        obs, reward, done, _ = venv.step(np.zeros(venv.num_envs, int))
        assert not reward.any() and not done.any()
        frames.append(obs)
    return frames


def light_task_frames(task: str, span: int, n: int, actions: int = 3):
    """The light tasks (count_flashes, which_first, last_light, more_flashes, how_long_ago, odd_or_even,
    which_turn) with 2x2 lights on 10x10 frames and ``actions`` actions: their vector env of ``n`` envs and the
    ``span`` frames of an episode (``span_frames``)."""
    from r2ac.envs import make_vec_env

    venv = make_vec_env(task, n, 0, span=span, size=10, light=2)
    assert venv.observation_shape == (3, 10, 10) and venv.num_actions == actions
    return venv, span_frames(venv, span)


def is_white_flash(frame: np.ndarray, white: int = 255) -> bool:
    """Whether a (3, 10, 10) frame is one white 2x2 flash on black (False for a black frame); asserts it is one of
    the two (how_long_ago's and odd_or_even's frames)."""
    if not frame.any():
        return False
    lit = (frame == white).all(axis=0)
    ys, xs = np.nonzero(lit)
    assert lit.sum() == 4 and np.ptp(ys) == 1 and np.ptp(xs) == 1 and (frame[:, ~lit] == 0).all()
    return True


def light_colour(frame: np.ndarray, colours):
    """The index in ``colours`` of the 2x2 light on a (3, H, W) frame, or None for a black frame; asserts the frame
    is one whole light on black otherwise (the light tasks' frames)."""
    if not frame.any():
        return None
    for c, rgb in enumerate(colours):
        lit = (frame == rgb[:, None, None]).all(axis=0)
        if lit.any():
            assert lit.sum() == 4 and (frame[:, ~lit] == 0).all()  # one 2x2 light on black
            return c
    raise AssertionError("a frame that is neither black nor a light")


def answer_the_query(venv, right, wrong, episode_length: int) -> None:
    """Answer the query of an even number of envs, right in the even-numbered ones and wrong in the others: every
    episode must end there, pay 1 for exactly the right answers, and have lasted ``episode_length`` steps."""
    n = len(right)
    _, reward, done, info = venv.step(np.where(np.arange(n) % 2 == 0, right, wrong))
    assert done.all() and list(reward) == [1.0, 0.0] * (n // 2)
    assert list(info["episode_length"]) == [episode_length] * n


def answer_the_grey_query(venv, right, query: int, span: int, actions: int = 2) -> None:
    """Step an even number of envs past their ``span`` frames onto the query (action 0): it must be all ``query``
    grey, pay nothing and end nothing; then ``answer_the_query`` with ``right`` (one answer per env) and, for the
    wrong ones, the next of ``actions`` actions."""
    obs, reward, done, _ = venv.step(np.zeros(venv.num_envs, int))
    assert (obs == query).all() and not reward.any() and not done.any()
    right = np.asarray(right)
    answer_the_query(venv, right, (right + 1) % actions, episode_length=span + 1)


def share_of_steps_showing(env, shows, steps: int = 400) -> float:
    """The share of ``steps`` steps after a reset (seed 1) whose observation ``shows(obs)`` says holds a distractor
    (the env's span must be at least ``steps``)."""
    env.reset(seed=1)
    return sum(bool(shows(env.step(0)[0])) for _ in range(steps)) / steps


def square_quadrant(frame: np.ndarray, colours, background: int = 0, size: int = 10, side: int = 2):
    """The quadrant (0 top left, 1 top right, 2 bottom left, 3 bottom right) of the one ``side`` x ``side``
    square of one of ``colours`` on a (3, H, W) frame of a uniform ``background`` level, or None where the
    frame is all background; asserts the square is whole, of one of the colours and inside one quadrant."""
    lit = (frame != background).any(axis=0)
    if not lit.any():
        return None
    ys, xs = np.nonzero(lit)
    assert lit.sum() == side * side and np.ptp(ys) == side - 1 and np.ptp(xs) == side - 1
    assert any((frame[:, ys[0], xs[0]] == c).all() for c in colours)
    half = size // 2
    assert ys.min() // half == ys.max() // half and xs.min() // half == xs.max() // half  # inside one quadrant
    return 2 * (ys[0] // half) + xs[0] // half
