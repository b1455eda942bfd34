"""Unbiased collection of test episodes from a vector env.

Taking "the first n episodes to finish" over a batch of envs over-samples short episodes (an agent that
dies early finishes more episodes in the same time), which biases the mean return. ``EpisodeQuota``
takes each env's first k = ceil(n / num_envs) episodes instead, then interleaves them.
"""

from __future__ import annotations

import math
from typing import List

import numpy as np


class EpisodeQuota:
    def __init__(self, num_envs: int, episodes: int):
        if num_envs < 1 or episodes < 1:
            raise ValueError(f"need num_envs >= 1 and episodes >= 1, got {num_envs}, {episodes}")
        self.episodes = episodes
        self.k = math.ceil(episodes / num_envs)
        self.per_env: List[List[float]] = [[] for _ in range(num_envs)]

    def add(self, done, episode_return) -> None:
        """One vector step: ``done`` [B] bool, ``episode_return`` [B] (the finished episodes' returns)."""
        for e in np.flatnonzero(np.asarray(done)):
            if len(self.per_env[e]) < self.k:
                self.per_env[e].append(float(np.asarray(episode_return)[e]))

    def full(self) -> bool:
        return all(len(r) >= self.k for r in self.per_env)

    def returns(self) -> List[float]:
        """``episodes`` returns: round i takes every env's i-th episode."""
        out = [r[i] for i in range(self.k) for r in self.per_env]
        return out[:self.episodes]
