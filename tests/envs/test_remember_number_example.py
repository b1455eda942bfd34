"""examples/remember_number.py, the second user-written Gymnasium task (a quantity to keep, vector
observations), as r2ac's ``gym:`` kind sees it: an episode of span + 2 steps, paid only at the query for
saying whether the flagged number was larger than the query's, distractor numbers where asked, bad options
refused, and the bench's span read from one episode."""

import numpy as np
import pytest

from r2ac.bench.memory import gym_span
from r2ac.envs import make_vec_env
from r2ac.envs.gym_env import import_user_module

from example_checks import answer_the_query, share_of_steps_showing

_example = import_user_module("examples.remember_number")
RememberNumber = _example.RememberNumber

TASK = "gym:examples.remember_number:RememberNumber"


def test_the_flagged_number_then_nothing_then_the_query_pays_only_the_right_comparison():
    venv = make_vec_env(TASK, 8, 0, span=4)
    assert venv.observation_shape == (3,) and venv.num_actions == 2
    obs = venv.reset()
    assert (obs[:, 1] == 1).all() and (obs[:, 2] == 0).all() and ((obs[:, 0] >= 0) & (obs[:, 0] < 1)).all()
    a = obs[:, 0].copy()
    for t in range(1, 5):  # span 4: nothing shown
        obs, reward, done, _ = venv.step(np.zeros(8, np.int64))
        assert not obs.any() and not reward.any() and not done.any(), t
    obs, reward, done, _ = venv.step(np.zeros(8, np.int64))  # the query: b with its flag
    assert (obs[:, 2] == 1).all() and (obs[:, 1] == 0).all() and not done.any()
    right = (a > obs[:, 0]).astype(np.int64)
    answer_the_query(venv, right, 1 - right, episode_length=6)


def test_distractor_numbers_appear_unflagged_at_their_rate_and_the_span_is_read_from_an_episode():
    def unflagged_number(obs):
        assert obs[1] == 0 and obs[2] == 0
        return obs[0]

    assert 0.22 < share_of_steps_showing(RememberNumber(span=400, distractors=0.3), unflagged_number) < 0.38
    assert gym_span(TASK, {"span": 150}) == 152


@pytest.mark.parametrize("options, word", [({"span": -1}, "span"), ({"distractors": 2.0}, "distractors")])
def test_bad_options_are_refused_by_name(options, word):
    with pytest.raises(ValueError, match=word):
        RememberNumber(**options)
