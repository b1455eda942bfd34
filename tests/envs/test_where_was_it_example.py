"""examples/where_was_it.py, the third user-written Gymnasium task: 2-D grey-scale frames reach r2ac as
(1, H, W), the blob lies wholly inside the quadrant the query asks for, the query pays only that quadrant,
distractor blobs come at their rate, bad options are refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, share_of_steps_showing

_example = import_user_module("examples.where_was_it")
DARK, LIGHT, MIDLINES, WhereWasIt = _example.DARK, _example.LIGHT, _example.MIDLINES, _example.WhereWasIt

TASK = "gym:examples.where_was_it:WhereWasIt"


def lit(frame: np.ndarray) -> np.ndarray:
    """(H, W) mask of the blob's pixels in a (1, H, W) or (H, W) frame."""
    return frame.reshape(frame.shape[-2:]) == LIGHT


def quadrant_of(mask: np.ndarray) -> int:
    half = mask.shape[0] // 2
    ys, xs = np.nonzero(mask)
    top, left = ys.max() < half, xs.max() < half
    bottom, right = ys.min() >= half, xs.min() >= half
    assert (top or bottom) and (left or right), "the blob straddles a midline"
    return 2 * int(bottom) + int(right)


def test_the_blob_in_one_quadrant_then_background_then_the_query_pays_only_that_quadrant():
    venv = make_vec_env(TASK, 8, 0, span=4, size=16, blob=3)
    assert venv.observation_shape == (1, 16, 16) and venv.observation_dtype == np.uint8 and venv.num_actions == 4
    obs = venv.reset()
    quadrants = []
    for frame in obs:
        assert lit(frame).sum() == 9  # a 3x3 blob, the rest dark and noisy
        quadrants.append(quadrant_of(lit(frame)))
    assert len(set(quadrants)) > 1
    wrong = np.array([(q + 1) % 4 for q in quadrants])
    for t in range(1, 5):  # span 4: background only
        obs, reward, done, _ = venv.step(wrong)
        assert not (obs == LIGHT).any() and not reward.any() and not done.any(), t
        assert obs.max() <= DARK + 16 and obs.min() >= DARK - 16
    obs, reward, done, _ = venv.step(wrong)  # the query frame: the midlines lit
    assert (obs[:, :, 7:9, :] == MIDLINES).all() and (obs[:, :, :, 7:9] == MIDLINES).all() and not done.any()
    answer_the_query(venv, quadrants, wrong, episode_length=6)


def test_every_quadrant_comes_up_and_the_blob_never_straddles_a_midline():
    env = WhereWasIt(span=0, size=10, blob=5)  # a blob as large as a quadrant: one place in each
    seen = set()
    for seed in range(40):
        frame, _ = env.reset(seed=seed)
        q = quadrant_of(lit(frame))
        assert q == env.quadrant and lit(frame).sum() == 25
        seen.add(q)
    assert seen == {0, 1, 2, 3}


def test_distractor_blobs_appear_between_blob_and_query_at_their_rate():
    blobs = share_of_steps_showing(WhereWasIt(span=400, distractors=0.3), lambda frame: lit(frame).any())
    assert 0.22 < blobs < 0.38


def test_noise_zero_gives_a_flat_dark_background():
    env = WhereWasIt(span=3, noise=0)
    env.reset(seed=0)
    frame, *_ = env.step(0)
    assert (frame == DARK).all()


@pytest.mark.parametrize("options, word", [({"size": 7}, "size"), ({"blob": 20}, "blob"), ({"noise": 41}, "noise"),
                                           ({"distractors": -0.1}, "distractors"), ({"span": -1}, "span")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        WhereWasIt(**options)
