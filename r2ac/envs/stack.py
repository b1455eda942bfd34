"""``env.frame_stack``: each observation is the env's last ``k`` observations, stacked on the first axis.

A frame ``(C, H, W)`` becomes ``(k*C, H, W)`` (oldest frame first, so channels ``(k-1)*C ..`` are the
newest frame); a vector ``(D,)`` becomes ``(k*D,)``. Before an episode's first observation the stack holds
zeros, so the first step of an episode shows zeros beside its frame. Where the env reports
``info["final_observation"]`` (the last observation of an episode that ended), it is stacked the same way,
on the frames that came before it.

Motion is what a stack shows at once: the change between two frames is in one observation, where a core
whose recurrence is per unit (the eLSTM) has to build it from what two units wrote at different steps. On the
ball task (``examples/which_way.py``) two frames took the runs from chance in about half the agent steps, but each
step cost 2.5x as much on 2 CPU cores (twice the core's inputs and their RTRL sensitivities), so it is off by
default (docs/results.md, "Which way a ball moved: two frames in one observation").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from r2ac.envs.base import VecEnv

__all__ = ["FrameStackVecEnv", "stack_frames"]


class FrameStackVecEnv(VecEnv):
    """``venv`` whose observations are its last ``k`` observations, stacked on the first axis."""

    def __init__(self, venv: VecEnv, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"env.frame_stack must be an integer >= 1 (1: no stack), got {k!r}")
        shape = tuple(venv.observation_shape)
        if len(shape) not in (1, 3):
            raise ValueError(f"env.frame_stack={k}: observations of shape {shape} cannot be stacked; it stacks "
                             "image frames (C, H, W) on their channels and vectors (D,) end to end. Set "
                             "env.frame_stack=1")
        self.venv = venv
        self.k = self.stacked_frames = int(k)  # stacked_frames: a video of these observations shows the newest
        self.num_envs = venv.num_envs
        self.num_actions = venv.num_actions
        self.observation_dtype = venv.observation_dtype
        self.observation_shape = (self.k * shape[0],) + shape[1:]
        self._frames = np.zeros((venv.num_envs, self.k) + shape, dtype=venv.observation_dtype)

    def __getattr__(self, name: str) -> Any:
        # attributes the actor reads where an env kind has them (final_observations, box_actions, ...)
        if name == "venv":
            raise AttributeError(name)
        return getattr(self.venv, name)

    def _stacked(self, frames: np.ndarray) -> np.ndarray:
        return frames.reshape((frames.shape[0],) + self.observation_shape).copy()

    def _start(self, obs: np.ndarray) -> np.ndarray:
        self._frames[:] = 0
        self._frames[:, -1] = obs
        return self._stacked(self._frames)

    def reset(self) -> np.ndarray:
        return self._start(self.venv.reset())

    def desync(self, rng: np.random.Generator) -> np.ndarray | None:
        obs = self.venv.desync(rng)
        # an env moved to a later step of its first episode shows that frame with zeros before it, as at a start
        return None if obs is None else self._start(obs)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        obs, reward, done, info = self.venv.step(actions)
        done = np.asarray(done, dtype=bool)
        if "final_observation" in info:
            final = np.concatenate([self._frames[:, 1:], np.asarray(info["final_observation"])[:, None]], axis=1)
            info = {**info, "final_observation": self._stacked(final)}
        self._frames[:, :-1] = self._frames[:, 1:]
        self._frames[:, -1] = obs
        self._frames[done, :-1] = 0  # obs is the first of a new episode there
        return self._stacked(self._frames), reward, done, info

    def close(self) -> None:
        self.venv.close()


def stack_frames(venv: VecEnv, k: int) -> VecEnv:
    """``venv`` itself for ``k == 1``, else ``FrameStackVecEnv(venv, k)``."""
    if not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k == 1:
        return venv
    return FrameStackVecEnv(venv, k)
