"""Any Gymnasium env with a discrete action space, in a simple synchronous vector with same-step
autoreset.

Ids: ``gym:CartPole-v1`` (a registered id), ``gym:some.module:EnvId`` (import ``some.module`` first,
then make the id it registers, as ``gymnasium.make`` does), ``gym:some.module:EnvClass`` (a class of
that module, called with the options), or the same ``module:Id`` forms without the ``gym:`` prefix.
Options are passed to ``gymnasium.make`` (or to the class) as keyword arguments.

Observations: ``Box`` uint8 images ``(H, W, C)`` with C in {1, 3, 4} become ``(C, H, W)``, ``(H, W)``
becomes ``(1, H, W)``, images already ``(C, H, W)`` stay as they are; every other space is
flattened (``gymnasium.spaces.flatten``: a Box to its values, a Discrete to a one-hot, Dict/Tuple
concatenated) into a float32 vector ``(D,)``. Actions must be ``Discrete`` (any ``start``) or
``MultiDiscrete`` (one discrete action over the product of its choices, row-major). Subclasses in
``r2ac.envs.continuous`` (ids ``gymc:``, ``mujoco-p:``, ``mujoco-v:``, ``popgym:``) also take ``Box`` actions
(set ``box_actions = True``), keep only some observation entries (``_observation_indices``) and report
``info["final_observation"]`` (the last observation of an episode that ended; see ``final_observations``).
Env b is seeded with ``seed + b`` at the first reset; later resets continue its own generator.

Success: where an episode ends (terminated or truncated) and the env's step info holds ``"success"`` (a number or a
bool), the vector's info has it as ``info["success"]`` (float64, NaN where no episode ended or none was reported),
as r2ac's own tasks report theirs; runs log its mean as ``episode_success`` and ``r2ac bench memory`` judges a
``gym:`` task by it. A task whose return is not its success rate (rewards on the way) should report it.

Other numbers at an episode's end: every other key of the env's step info at the step that ends an episode whose
value is one number or bool (e.g. how many apples were picked) reaches the vector's info likewise, as float64 with
NaN where no episode ended or the env did not report it, so that ``r2ac eval`` prints its mean beside the return
and keeps it in ``eval.json`` (``episode_info``). Keys the vector's info has of its own (the return, the length,
``truncated``, ``final_observation``) and values that are not one number (arrays, strings, dicts) are left out.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

import gymnasium
import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions

__all__ = ["GymVecEnv", "resolve_gym_factory"]


def _success_value(value: Any, env_id: str) -> float:
    """The float of an env's ``info["success"]`` at an episode's end, or a ValueError that says what it must be."""
    v = np.asarray(value)
    if v.shape != () or v.dtype.kind not in "biuf":
        raise ValueError(f"gym env {env_id!r}: info['success'] at an episode's end must be one number or bool "
                         f"(1 / True: the episode succeeded), got {value!r}; r2ac logs its mean as "
                         f"episode_success. Report a scalar, or leave the key out")
    return float(v)


#: the vector's own info keys: an env's step info never overrides them
_OWN_INFO_KEYS = frozenset({"episode_return", "episode_length", "truncated", "final_observation", "success",
                            "env_failure"})


def _end_numbers(step_info: Any) -> dict[str, float]:
    """The keys of an env's step info (at an episode's end) whose value is one number or bool, as floats; the
    vector's own keys and every other kind of value are left out."""
    if not isinstance(step_info, dict):
        return {}
    out = {}
    for key, value in step_info.items():
        if key in _OWN_INFO_KEYS or not isinstance(key, str):
            continue
        if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) or (
                isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "biuf"):
            out[key] = float(value)
    return out


def import_user_module(name: str):
    """``importlib.import_module(name)``; where the module is not found and the working directory is not on
    ``sys.path`` (the ``r2ac`` console script's is its own bin directory), once more with it appended, as
    ``python -m`` would find a module of the directory the command runs in."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        top = name.split(".")[0]
        if exc.name != top or cwd in {os.path.abspath(p or ".") for p in sys.path}:
            raise
        sys.path.append(cwd)
        return importlib.import_module(name)


def resolve_gym_factory(spec: str) -> Callable[..., gymnasium.Env]:
    """``"CartPole-v1"`` / ``"module:EnvId"`` / ``"module:EnvClass"`` -> a callable making one env."""
    if ":" in spec:
        module_name, _, name = spec.rpartition(":")
        try:
            module = import_user_module(module_name)
        except ImportError as exc:
            raise ValueError(f"gym env {spec!r}: cannot import module {module_name!r}: {exc}. The module must be "
                             f"importable where the command runs: run from the directory that holds it, or add its "
                             f"directory to PYTHONPATH (on a Ray cluster, on every node)") from exc
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
    if isinstance(space, gymnasium.spaces.Box):
        # what spaces.flatten does for a Box, without its per-call dispatch (measured: `r2ac bench vecenv`)
        return (int(np.prod(space.shape)),), np.float32, lambda o: np.asarray(o, dtype=np.float32).reshape(-1)
    try:
        dim = gymnasium.spaces.flatdim(space)
    except (NotImplementedError, ValueError, TypeError) as exc:
        raise ValueError(f"unsupported gymnasium observation space {space}") from exc
    return (int(dim),), np.float32, lambda o: gymnasium.spaces.flatten(space, o)


#: ``GymVecEnv.desync`` measures an episode's course on at most this many random steps
DESYNC_PROBE_STEPS = 10_000


class GymVecEnv(VecEnv):
    """``gym:<id>``: a list of gymnasium envs stepped in order, with same-step autoreset."""

    #: accept ``Box`` action spaces (continuous actions, see ``r2ac.envs.continuous``)
    box_actions = False
    #: add ``info["final_observation"]`` ([B, *obs], zeros where not done) for time-limit bootstrapping
    final_observations = False

    def __init__(self, env_id: str, num_envs: int, seed: int, **options: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        factory = self._factory(env_id)
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.envs: list[gymnasium.Env] = []
        try:
            for _ in range(self.num_envs):
                self.envs.append(factory(**options))
        except TypeError as exc:
            self.close()
            raise ValueError(f"gym env {env_id!r} rejected options {sorted(options)}: {exc}") from exc
        try:
            self._setup_actions(self.envs[0].action_space)
            shape, self.observation_dtype, convert = _observation_converter(self.envs[0].observation_space)
            index = self._observation_indices(self.envs[0], shape)
        except ValueError:
            self.close()
            raise
        if index is None:
            self.observation_shape, self._convert = shape, convert
        else:
            index = np.asarray(index, dtype=np.int64)
            self.observation_shape = (len(index),)
            self._convert = lambda o, _c=convert, _i=index: _c(o)[_i]
        self.seed = int(seed)
        self.tracker = EpisodeTracker(self.num_envs)
        self._seeded = False
        self._needs_reset = True

    # -- hooks for subclasses ----------------------------------------------------------------------
    def _factory(self, env_id: str) -> Callable[..., gymnasium.Env]:
        return resolve_gym_factory(env_id)

    def _observation_indices(self, env: gymnasium.Env, shape: tuple[int, ...]):
        """Entries of the flattened observation to keep (None: all)."""
        return None

    def _setup_actions(self, space: gymnasium.Space) -> None:
        self.action_kind = "discrete"
        self._action_nvec = None
        if isinstance(space, gymnasium.spaces.Discrete):
            self.num_actions = int(space.n)
            self._action_start = int(space.start)
        elif isinstance(space, gymnasium.spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self.num_actions = int(np.prod(space.nvec))
            self._action_nvec = tuple(int(n) for n in space.nvec)
            self._action_start = space.start if hasattr(space, "start") else np.zeros(len(space.nvec), np.int64)
        elif isinstance(space, gymnasium.spaces.Box) and self.box_actions:
            if len(space.shape) != 1 or not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
                raise ValueError(f"gym env {self.env_id!r} has action space {space}: Box actions must be a "
                                 "vector with finite bounds")
            self.action_kind = "continuous"
            self.num_actions = 0
            self.action_dim = int(space.shape[0])
            self._action_low = space.low.astype(np.float64)
            self._action_high = space.high.astype(np.float64)
            self._action_dtype = space.dtype
            return
        else:
            hint = ("; for Box (continuous) actions use the PPO agent with 'gymc:<id>'"
                    if isinstance(space, gymnasium.spaces.Box) else "")
            raise ValueError(f"gym env {self.env_id!r} has action space {space}: r2ac supports "
                             f"discrete (gymnasium.spaces.Discrete) action spaces only{hint}")
        self.action_dim = 1

    def _env_action(self, actions: np.ndarray, b: int) -> Any:
        """Env b's action from row b of the (checked) batch of actions."""
        if self.action_kind == "continuous":
            return actions[b]
        if self._action_nvec is not None:
            return np.asarray(np.unravel_index(int(actions[b]), self._action_nvec), dtype=np.int64) \
                + self._action_start
        return int(actions[b]) + self._action_start

    def _check_actions(self, actions: Any) -> np.ndarray:
        if self.action_kind != "continuous":
            return check_actions(actions, self.num_envs, self.num_actions)
        a = np.asarray(actions, dtype=np.float64)
        if a.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"continuous actions must have shape ({self.num_envs}, {self.action_dim}), "
                             f"got {a.shape}")
        # the agent acts in [-1, 1] per dimension: clip, then map affinely onto [low, high]
        a = np.clip(a, -1.0, 1.0)
        a = self._action_low + (a + 1.0) * 0.5 * (self._action_high - self._action_low)
        return a.astype(self._action_dtype)

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

    def _random_action(self, rng: np.random.Generator, b: int) -> Any:
        return self._env_action(rng.integers(0, self.num_actions, size=self.num_envs), b)

    def desync(self, rng: np.random.Generator) -> np.ndarray | None:
        """The course of an episode is the length of one episode of env 0 under random actions (at most
        ``DESYNC_PROBE_STEPS``); each env then starts a new episode and takes a uniform number of random
        actions below that length (starting over where its episode ends). Discrete actions only (the
        actor's); ``None`` for continuous ones."""
        if self._needs_reset:
            raise RuntimeError("call reset() before desync()")
        if self.action_kind == "continuous":
            return None
        course = 0
        self.envs[0].reset()
        while course < DESYNC_PROBE_STEPS:
            course += 1
            _, _, term, trunc, _ = self.envs[0].step(self._random_action(rng, 0))
            if term or trunc:
                break
        obs = self._obs_buffer()
        for b, env in enumerate(self.envs):
            o, _ = env.reset()
            for _ in range(int(rng.integers(0, course))):
                o, _, term, trunc, _ = env.step(self._random_action(rng, b))
                if term or trunc:
                    o, _ = env.reset()
            obs[b] = self._convert(o)
        self.tracker.reset()
        return obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = self._check_actions(actions)
        obs = self._obs_buffer()
        final = np.zeros_like(obs) if self.final_observations else None
        reward = np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        success = None
        numbers: dict[str, np.ndarray] = {}
        for b, env in enumerate(self.envs):
            o, r, term, trunc, step_info = env.step(self._env_action(actions, b))
            reward[b], terminated[b], truncated[b] = r, term, trunc
            if term or trunc:
                if isinstance(step_info, dict) and "success" in step_info:
                    if success is None:
                        success = np.full(self.num_envs, np.nan)
                    success[b] = _success_value(step_info["success"], self.env_id)
                for key, value in _end_numbers(step_info).items():
                    numbers.setdefault(key, np.full(self.num_envs, np.nan))[b] = value
                if final is not None:
                    final[b] = self._convert(o)
                o, _ = env.reset()
            obs[b] = self._convert(o)
        done = terminated | truncated
        info = self.tracker.update(reward, done)
        info["truncated"] = truncated & ~terminated
        info.update(numbers)
        if success is not None:
            info["success"] = success
        if final is not None:
            info["final_observation"] = final
        return obs, reward, done, info

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
