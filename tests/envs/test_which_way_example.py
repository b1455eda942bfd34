"""examples/which_way.py, the fourth user-written Gymnasium task: the ball at step 0 and step 1 differ by the
stride in the episode's direction and never leave the frame, the frames between are black, the query pays only
the direction, distractor balls come at their rate, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, share_of_steps_showing

_example = import_user_module("examples.which_way")
BALL, MOVES, QUERY, WhichWay = _example.BALL, _example.MOVES, _example.QUERY, _example.WhichWay

TASK = "gym:examples.which_way:WhichWay"


def ball_corner(frame: np.ndarray) -> tuple[int, int] | None:
    """The top-left pixel of the ball in a (3, H, W) frame, or None."""
    ys, xs = np.nonzero((frame.transpose(1, 2, 0) == BALL).all(axis=2))
    return (int(ys.min()), int(xs.min())) if len(ys) else None


def test_the_ball_moves_by_the_stride_then_black_frames_then_the_query_pays_only_the_direction():
    venv = make_vec_env(TASK, 8, 0, span=3, size=12, ball=2, stride=3)
    assert venv.observation_shape == (3, 12, 12) and venv.num_actions == 4
    obs = venv.reset()
    assert all((f == BALL[:, None, None]).all(axis=0).sum() == 4 for f in obs)  # a 2x2 ball on black
    first = [ball_corner(f) for f in obs]
    wrong = np.zeros(8, int)
    obs, *_ = venv.step(wrong)
    directions = []
    for a, frame in zip(first, obs):
        b = ball_corner(frame)
        move = (b[0] - a[0], b[1] - a[1])
        assert move in [(3 * dy, 3 * dx) for dy, dx in MOVES]
        directions.append([(3 * dy, 3 * dx) for dy, dx in MOVES].index(move))
    wrong = np.array([(d + 1) % 4 for d in directions])
    for t in range(3):  # span 3: black
        obs, reward, done, _ = venv.step(wrong)
        assert not obs.any() and not reward.any() and not done.any(), t
    obs, reward, done, _ = venv.step(wrong)  # the query: a grey frame
    assert (obs == QUERY).all() and not done.any()
    answer_the_query(venv, directions, wrong, episode_length=6)


def test_every_direction_comes_up_and_the_ball_stays_on_the_frame():
    env = WhichWay(span=0, size=8, ball=3, stride=5)  # the move spans the frame: one start per direction and axis
    seen = set()
    for seed in range(60):
        frame0, _ = env.reset(seed=seed)
        frame1, *_ = env.step(0)
        for frame in (frame0, frame1):
            assert (frame == BALL).all(axis=2).sum() == 9
        seen.add(env.direction)
    assert seen == {0, 1, 2, 3}


def test_distractor_balls_appear_between_the_move_and_the_query_at_their_rate():
    balls = share_of_steps_showing(WhichWay(span=402, distractors=0.3), lambda frame: frame.any(), steps=400)
    assert 0.22 < balls < 0.38


@pytest.mark.parametrize("options, word", [({"ball": 0}, "ball"), ({"stride": 30}, "stride"),
                                           ({"distractors": 2.0}, "distractors"), ({"span": -3}, "span")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhichWay(**options)
