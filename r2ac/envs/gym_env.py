"""Any Gymnasium env with a discrete action space, in a simple synchronous vector with same-step
autoreset.

Ids: ``gym:CartPole-v1`` (a registered id), ``gym:some.module:EnvId`` (import ``some.module`` first,
then make the id it registers, as ``gymnasium.make`` does), ``gym:some.module:EnvClass`` (a class of
that module, called with the options), or the same ``module:Id`` forms without the ``gym:`` prefix.
Options are passed to ``gymnasium.make`` (or to the class) as keyword arguments.

Observations: ``Box`` uint8 images ``(H, W, C)`` with C in {1, 3, 4} become ``(C, H, W)``, ``(H, W)``
becomes ``(1, H, W)``, images already ``(C, H, W)`` stay as they are; every other space is
flattened (``gymnasium.spaces.flatten``: a Box to its values, a Discrete to a one-hot, Dict/Tuple
concatenated) into a float32 vector ``(D,)``. Actions must be ``Discrete`` (any ``start``).
Env b is seeded with ``seed + b`` at the first reset; later resets continue its own generator.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import gymnasium
import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions

__all__ = ["GymVecEnv", "resolve_gym_factory"]


def resolve_gym_factory(spec: str) -> Callable[..., gymnasium.Env]:
    """``"CartPole-v1"`` / ``"module:EnvId"`` / ``"module:EnvClass"`` -> a callable making one env."""
    if ":" in spec:
        module_name, _, name = spec.rpartition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"gym env {spec!r}: cannot import module {module_name!r}: {exc}") from exc
        if name in gymnasium.registry:
            return lambda **kw: gymnasium.make(name, **kw)
        attr = getattr(module, name, None)
        if isinstance(attr, type) and issubclass(attr, gymnasium.Env):
            return attr
        raise ValueError(f"gym env {spec!r}: {name!r} is neither a registered gymnasium id nor a "
                         f"gymnasium.Env class in module {module_name!r}")
    if spec in gymnasium.registry:
        return lambda **kw: gymnasium.make(spec, **kw)
    raise ValueError(f"gym env {spec!r} is not a registered gymnasium id (use 'module:Id' to "
                     "import the module that registers it first)")


def _observation_converter(space: gymnasium.Space) -> tuple[tuple[int, ...], type, Callable[[Any], np.ndarray]]:
    """(shape, dtype, obs -> array) for one env's observation space."""
    if isinstance(space, gymnasium.spaces.Box) and space.dtype == np.uint8:
        shape = space.shape
        if len(shape) == 3 and shape[-1] in (1, 3, 4) and shape[0] not in (1, 3, 4):
            return (shape[2], shape[0], shape[1]), np.uint8, lambda o: np.asarray(o).transpose(2, 0, 1)
        if len(shape) == 3:
            return tuple(shape), np.uint8, np.asarray
        if len(shape) == 2:
            return (1, *shape), np.uint8, lambda o: np.asarray(o)[None]
    try:
        dim = gymnasium.spaces.flatdim(space)
    except (NotImplementedError, ValueError, TypeError) as exc:
        raise ValueError(f"unsupported gymnasium observation space {space}") from exc
    return (int(dim),), np.float32, lambda o: gymnasium.spaces.flatten(space, o)


class GymVecEnv(VecEnv):
    """``gym:<id>``: a list of gymnasium envs stepped in order, with same-step autoreset."""

    def __init__(self, env_id: str, num_envs: int, seed: int, **options: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        factory = resolve_gym_factory(env_id)
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.envs: list[gymnasium.Env] = []
        try:
            for _ in range(self.num_envs):
                self.envs.append(factory(**options))
        except TypeError as exc:
            self.close()
            raise ValueError(f"gym env {env_id!r} rejected options {sorted(options)}: {exc}") from exc
        action_space = self.envs[0].action_space
        if not isinstance(action_space, gymnasium.spaces.Discrete):
            self.close()
            raise ValueError(f"gym env {env_id!r} has action space {action_space}: r2ac supports "
                             "discrete (gymnasium.spaces.Discrete) action spaces only")
        self.num_actions = int(action_space.n)
        self._action_start = int(action_space.start)
        self.observation_shape, self.observation_dtype, self._convert = \
            _observation_converter(self.envs[0].observation_space)
        self.seed = int(seed)
        self.tracker = EpisodeTracker(self.num_envs)
        self._seeded = False
        self._needs_reset = True

    def _obs_buffer(self) -> np.ndarray:
        return np.empty((self.num_envs, *self.observation_shape), dtype=self.observation_dtype)

    def reset(self) -> np.ndarray:
        obs = self._obs_buffer()
        for b, env in enumerate(self.envs):
            o, _ = env.reset(seed=None if self._seeded else self.seed + b)
            obs[b] = self._convert(o)
        self._seeded = True
        self.tracker.reset()
        self._needs_reset = False
        return obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        obs = self._obs_buffer()
        reward = np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for b, env in enumerate(self.envs):
            o, r, term, trunc, _ = env.step(int(actions[b]) + self._action_start)
            reward[b], terminated[b], truncated[b] = r, term, trunc
            if term or trunc:
                o, _ = env.reset()
            obs[b] = self._convert(o)
        done = terminated | truncated
        info = self.tracker.update(reward, done)
        info["truncated"] = truncated & ~terminated
        return obs, reward, done, info

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
