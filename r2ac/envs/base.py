"""The vectorized environment interface the actor uses, and helpers shared by every env kind.

Contract (every ``VecEnv``)::

    venv.num_envs, venv.observation_shape, venv.observation_dtype, venv.num_actions
    obs = venv.reset()                              # [B, *observation_shape]
    obs, reward, done, info = venv.step(actions)    # actions int [B]
    venv.close()

Same-step autoreset (the torchbeast/IMPALA convention): where ``done[b]`` is True the episode ended
with this step (termination or truncation), ``reward[b]`` is that last step's reward and ``obs[b]`` is
already the first observation of the next episode. ``info["episode_return"]`` (float64) and
``info["episode_length"]`` (int64, agent steps) describe the finished episode where ``done`` and are
NaN / 0 elsewhere.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

__all__ = ["EpisodeTracker", "VecEnv", "check_actions", "nan_where_not"]


class VecEnv(abc.ABC):
    """A batch of ``num_envs`` environments stepped together with same-step autoreset."""

    num_envs: int
    observation_shape: tuple[int, ...]
    observation_dtype: type
    num_actions: int

    @abc.abstractmethod
    def reset(self) -> np.ndarray:
        """Start a new episode in every env; returns observations ``[num_envs, *observation_shape]``."""

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Advance every env by one agent step; returns ``(obs, reward float32, done bool, info)``."""

    def desync(self, rng: np.random.Generator) -> np.ndarray | None:
        """Right after ``reset()``: move each env's first episode to a random step of its course, so that
        envs whose episodes all last the same number of steps stop ending in the same step; returns the
        new observations. The first episode of each env is cut short (what it showed before that step
        was never seen; it ends and scores as usual). ``None``: this env kind cannot (the default)."""
        return None

    def close(self) -> None:
        """Release the environments (idempotent)."""

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_envs={self.num_envs}, "
                f"observation_shape={self.observation_shape}, "
                f"observation_dtype={np.dtype(self.observation_dtype).name}, "
                f"num_actions={self.num_actions})")


def check_actions(actions: Any, num_envs: int, num_actions: int) -> np.ndarray:
    """Validate a batch of discrete actions and return it as an int64 array ``[num_envs]``."""
    a = np.asarray(actions)
    if a.shape != (num_envs,):
        raise ValueError(f"actions must have shape ({num_envs},), got {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"actions must be integers, got dtype {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if num_envs and (a.min() < 0 or a.max() >= num_actions):
        raise ValueError(f"actions must lie in [0, {num_actions}), got min {a.min()} max {a.max()}")
    return a


def nan_where_not(done: np.ndarray, values: np.ndarray) -> np.ndarray:
    """float64 copy of ``values`` where ``done`` and NaN elsewhere."""
    return np.where(done, values.astype(np.float64, copy=False), np.nan)


class EpisodeTracker:
    """Running undiscounted return and length per env; produces the ``episode_*`` info entries."""

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> None:
        self.returns[:] = 0.0
        self.lengths[:] = 0

    def update(self, reward: np.ndarray, done: np.ndarray) -> dict[str, np.ndarray]:
        """Add one step; return ``{"episode_return", "episode_length"}`` and restart finished episodes."""
        self.returns += reward
        self.lengths += 1
        info = {
            "episode_return": np.where(done, self.returns, np.nan),
            "episode_length": np.where(done, self.lengths, 0),
        }
        self.returns[done] = 0.0
        self.lengths[done] = 0
        return info
