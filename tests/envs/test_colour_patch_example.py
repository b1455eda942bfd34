"""examples/colour_patch.py, the user-written Gymnasium task of docs/environments.md ("Your own task"), as
r2ac's ``gym:`` kind sees it: channels-last frames turned (C, H, W), an episode of span + 2 steps, paid only
for naming the cue's colour at the query, distractor squares where asked, bad options refused."""

import numpy as np
import pytest

from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, share_of_steps_showing

# as `gym:examples.colour_patch:...` imports it: from the working directory (the repository root) where
# sys.path does not hold it (pytest's console script)
_example = import_user_module("examples.colour_patch")
BACKGROUND, COLOURS, GRAIN, ColourPatch = _example.BACKGROUND, _example.COLOURS, _example.GRAIN, _example.ColourPatch

TASK = "gym:examples.colour_patch:ColourPatch"


def coloured(frame: np.ndarray) -> np.ndarray:
    """(H, W) mask of the pixels outside the grey background's range (a square), for a (3, H, W) frame."""
    f = frame.astype(int)
    return (np.abs(f - BACKGROUND) > GRAIN).any(axis=0)


def test_the_cue_square_then_background_then_the_query_pays_only_the_cues_colour():
    venv = make_vec_env(TASK, 6, 0, span=5, colours=4, size=20, patch=5)
    assert venv.observation_shape == (3, 20, 20) and venv.observation_dtype == np.uint8 and venv.num_actions == 4
    obs = venv.reset()
    cues = []
    for frame in obs:  # a 5x5 square of one cue colour, the rest grey
        mask = coloured(frame)
        assert mask.sum() == 25
        colour = frame[:, mask][:, 0]
        cues.append(int(np.flatnonzero((COLOURS[:4] == colour).all(axis=1))[0]))
    wrong = np.array([(c + 1) % 4 for c in cues])
    for t in range(1, 6):  # span 5: background only
        obs, reward, done, _ = venv.step(wrong)
        assert not coloured(obs).any() and not reward.any() and not done.any(), t
    obs, reward, done, _ = venv.step(wrong)  # the query frame: a white border
    assert (obs[:, :, :2, :] == 255).all() and not done.any()
    answer_the_query(venv, cues, wrong, episode_length=7)


def test_distractor_squares_appear_between_cue_and_query_at_their_rate():
    squares = share_of_steps_showing(ColourPatch(span=400, distractors=0.3),
                                     lambda frame: coloured(frame.transpose(2, 0, 1)).any())
    assert 0.22 < squares < 0.38


def test_grain_sets_the_backgrounds_noise_and_zero_gives_flat_grey():
    flat, _ = ColourPatch(span=3, grain=0).reset(seed=0)
    grey = ~(np.abs(flat.astype(int) - BACKGROUND) > 0).any(axis=2)
    assert grey.sum() == 24 * 24 - 36  # everything but the 6x6 square is exactly grey
    env = ColourPatch(span=3, grain=60)
    env.reset(seed=0)
    frame, *_ = env.step(0)  # a background frame
    spread = np.abs(frame.astype(int) - BACKGROUND)
    assert spread.max() <= 60 and spread.max() > GRAIN


@pytest.mark.parametrize("grain_on, grainy", [("all", [True, True, True]), ("cue", [True, False, False]),
                                             ("between", [False, True, True])])
def test_grain_on_puts_the_noise_on_the_cues_frame_the_others_or_all(grain_on, grainy):
    env = ColourPatch(span=1, grain_on=grain_on)
    frames = [env.reset(seed=0)[0]] + [env.step(0)[0] for _ in range(2)]  # the cue, one between, the query
    for frame, noisy in zip(frames, grainy):
        inner = frame[2:-2, 2:-2].astype(int)  # inside the query's border
        background = inner[(np.abs(inner - BACKGROUND) <= GRAIN).all(axis=2)]  # not the square
        assert (background != BACKGROUND).any() == noisy


@pytest.mark.parametrize("options, word", [({"colours": 7}, "colours"), ({"patch": 30}, "patch"),
                                           ({"distractors": 1.5}, "distractors"), ({"grain": -1}, "grain"),
                                           ({"grain_on": "query"}, "grain_on")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        ColourPatch(**options)
