import numpy as np
import pytest

from r2ac.evaluation import EpisodeQuota


def test_quota_is_not_biased_towards_short_episodes():
    """env 0 finishes an episode (return 0) every step, env 1 one (return 1) every 10 steps: the first 10
    episodes to finish would be almost all from env 0; the quota takes 5 from each."""
    q = EpisodeQuota(2, 10)
    t = 0
    while not q.full():
        t += 1
        q.add(np.array([True, t % 10 == 0]), np.array([0.0, 1.0]))
    assert q.returns() == [0.0, 1.0] * 5 and np.mean(q.returns()) == 0.5


def test_quota_rounds_up_and_validates():
    q = EpisodeQuota(4, 6)
    assert q.k == 2
    for _ in range(2):
        q.add(np.ones(4, bool), np.arange(4.0))
    assert q.full() and q.returns() == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        EpisodeQuota(0, 3)
