"""Vectorized environments for the actor: ``make_vec_env(env_id, num_envs, seed, **options)``.

Env ids::

    tmaze, watermaze                 built-in memory tasks (numpy-vectorized), see r2ac.envs.memory
    cue, copy, keydoor               built-in long-credit tasks (delayed cue, copy, key to door), r2ac.envs.recall
    atari:<Game>                     ale-py native vector env, e.g. atari:Breakout, atari:MsPacman
    procgen:<game>                   procgen's vector env, e.g. procgen:chaser
    dmlab:<level>                    DeepMind Lab (`make dmlab`), e.g. dmlab:rooms_watermaze
    gym:<id> | gym:<module>:<Id>     any Gymnasium env with discrete actions, e.g. gym:CartPole-v1
    <module>:<Id>                    same as gym:<module>:<Id>
    minigrid:<Id>                    a MiniGrid task (one-hot views), e.g. minigrid:MemoryS13Random
    gymc:<id>                        any Gymnasium env, Box (continuous) actions too (PPO agent)
    mujoco:<Env-vN>                  Gymnasium MuJoCo, e.g. mujoco:HalfCheetah-v5
    mujoco-p:<Env-vN> / mujoco-v:..  MuJoCo-P (velocities hidden) / MuJoCo-V (positions hidden)
    popgym:<Name>                    a POPGym memory task, e.g. popgym:RepeatPreviousEasy
    (the last four kinds: r2ac.envs.continuous, the PPO agent of Elelimy et al. 2024)

Every env follows the contract of ``r2ac.envs.base.VecEnv`` (same-step autoreset; ``info`` carries
``episode_return`` / ``episode_length`` where ``done``). Options and defaults: ``env_options(env_id)``
and docs/environments.md. Importing this package registers ``r2ac/TMaze-v0`` and
``r2ac/Watermaze-v0`` with gymnasium.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import load_env_creator

from r2ac.envs.atari import AtariVecEnv
from r2ac.envs.base import EpisodeTracker, VecEnv
from r2ac.envs.continuous import (BoxGymVecEnv, MujocoPVecEnv, MujocoVecEnv, MujocoVVecEnv, PopGymVecEnv,
                                  popgym_class)
from r2ac.envs.dmlab import DMLabVecEnv
from r2ac.envs.gym_env import GymVecEnv, resolve_gym_factory
from r2ac.envs.minigrid_env import MiniGridVecEnv
from r2ac.envs.memory import TMazeEnv, TMazeVecEnv, WatermazeEnv, WatermazeVecEnv
from r2ac.envs.procgen_env import ProcgenVecEnv
from r2ac.envs.recall import CopyVecEnv, CueVecEnv, KeyDoorVecEnv
from r2ac.envs.stack import FrameStackVecEnv, stack_frames

__all__ = [
    "ENV_KINDS",
    "POMDP_KINDS",
    "EpisodeTracker",
    "FrameStackVecEnv",
    "TMazeEnv",
    "VecEnv",
    "WatermazeEnv",
    "env_options",
    "make_config_env",
    "make_vec_env",
    "needs_prev_action",
    "parse_env_id",
]

# kind -> VecEnv class. "tmaze"/"watermaze" are complete ids; the others take "<kind>:<name>".
ENV_KINDS: dict[str, type[VecEnv]] = {
    "tmaze": TMazeVecEnv,
    "watermaze": WatermazeVecEnv,
    "cue": CueVecEnv,
    "copy": CopyVecEnv,
    "keydoor": KeyDoorVecEnv,
    "atari": AtariVecEnv,
    "procgen": ProcgenVecEnv,
    "dmlab": DMLabVecEnv,
    "gym": GymVecEnv,
    "minigrid": MiniGridVecEnv,
}
# Kinds of the PPO agent of Elelimy et al. 2024 (continuous actions, masked MuJoCo, POPGym); kept apart from ENV_KINDS,
# the discrete-action kinds every agent runs on. All take free-form options (passed to the env).
POMDP_KINDS: dict[str, type[VecEnv]] = {
    "gymc": BoxGymVecEnv,
    "mujoco": MujocoVecEnv,
    "mujoco-p": MujocoPVecEnv,
    "mujoco-v": MujocoVVecEnv,
    "popgym": PopGymVecEnv,
}
_ALL_KINDS: dict[str, type[VecEnv]] = {**ENV_KINDS, **POMDP_KINDS}
_MEMORY_KINDS = ("tmaze", "watermaze", "cue", "copy", "keydoor")
_PREFIX_KINDS = ("atari", "procgen", "dmlab", "gym", "minigrid") + tuple(POMDP_KINDS)
_FREE_OPTION_KINDS = ("gym", "minigrid") + tuple(POMDP_KINDS)

_ALLOWED_IDS = (
    "'tmaze', 'watermaze', 'cue', 'copy', 'keydoor', 'atari:<Game>' (e.g. atari:Breakout), "
    "'procgen:<game>' (e.g. procgen:chaser), "
    "'dmlab:<level>' (e.g. dmlab:rooms_watermaze), 'gym:<gymnasium id>' (e.g. gym:CartPole-v1), "
    "'gym:<module>:<Id>' or '<module>:<Id>', 'minigrid:<Id>' (e.g. minigrid:MemoryS13Random); "
    "with continuous actions (PPO): 'gymc:<id>', "
    "'mujoco:<Env-vN>', 'mujoco-p:<Env-vN>' (e.g. mujoco-p:HalfCheetah-v5), 'mujoco-v:<Env-vN>', "
    "'popgym:<Name>' (e.g. popgym:RepeatPreviousEasy)"
)


def parse_env_id(env_id: str) -> tuple[str, str | None]:
    """``env_id`` -> ``(kind, name)``; ``name`` is None for the built-in memory tasks."""
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}; allowed: {_ALLOWED_IDS}")
    env_id = env_id.strip()
    if env_id.lower() in _MEMORY_KINDS:
        return env_id.lower(), None
    if ":" in env_id:
        prefix, _, rest = env_id.partition(":")
        if prefix.lower() in _PREFIX_KINDS:
            if not rest:
                raise ValueError(f"env id {env_id!r} names no env after {prefix!r}; allowed: {_ALLOWED_IDS}")
            return prefix.lower(), rest
        if prefix.lower() in _MEMORY_KINDS:
            raise ValueError(f"unknown env id {env_id!r}: {prefix!r} takes no name; allowed: {_ALLOWED_IDS}")
        return "gym", env_id  # <module>:<Id>
    if env_id in gymnasium.registry:
        return "gym", env_id
    raise ValueError(f"unknown env id {env_id!r}; allowed: {_ALLOWED_IDS}")


def needs_prev_action(env_id: str) -> bool:
    """Whether the task's own definition says that its observation needs the previous action beside it, to be
    read at all: POPGym's ``obs_requires_prev_action`` (its bandit, Concentration, Battleship and MineSweeper,
    whose observation says what an action revealed, not which action it was), and the same class attribute on
    a Gymnasium env of a user's own (``gym:`` and ``gymc:`` ids: the env class, or the class a registered id's
    entry point names). ``model.prev_action_input: auto`` feeds the previous action to the core where this is
    true. False for every other env."""
    kind, name = parse_env_id(env_id)
    if kind == "popgym":
        return _declares_prev_action(popgym_class(name))
    if kind in ("gym", "gymc"):
        return _declares_prev_action(_gym_env_class(name))
    return False


def _declares_prev_action(cls: Any) -> bool:
    """A class's ``obs_requires_prev_action`` (POPGym's name for it); only ``True`` itself counts."""
    return getattr(cls, "obs_requires_prev_action", False) is True


def _gym_env_class(spec: str) -> Any:
    """The class behind a ``gym:`` id (``module:Class``, ``module:Id`` or a registered ``Id``), or None where the
    id's entry point is not a class (a function that builds the env)."""
    factory = resolve_gym_factory(spec)  # imports the user's module; a clear error where it cannot
    if isinstance(factory, type):
        return factory
    registered = spec.rpartition(":")[2]
    entry_point = gymnasium.spec(registered).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return creator if isinstance(creator, type) else None


def env_options(env_id_or_kind: str) -> dict[str, Any]:
    """The options (keyword arguments) an env kind accepts, with their defaults.

    gym envs (and the kinds of ``POMDP_KINDS``) take whatever keyword arguments ``gymnasium.make`` (or
    the POPGym task) passes to the env: ``{}`` here.
    """
    kind = env_id_or_kind if env_id_or_kind in _ALL_KINDS else parse_env_id(env_id_or_kind)[0]
    params = inspect.signature(_ALL_KINDS[kind].__init__).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def make_vec_env(env_id: str, num_envs: int, seed: int, **options: Any) -> VecEnv:
    """Build ``num_envs`` copies of ``env_id`` as one vector env, deterministic given ``seed``.

    ``options`` are the env kind's keyword options (from the YAML config); unknown names raise a
    ValueError that lists the allowed ones.
    """
    kind, name = parse_env_id(env_id)
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    cls = _ALL_KINDS[kind]
    if kind not in _FREE_OPTION_KINDS:
        allowed = env_options(kind)
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            listing = ", ".join(f"{k}={v!r}" for k, v in allowed.items())
            raise ValueError(f"unknown option(s) {unknown} for env {env_id!r}; allowed options "
                             f"(with defaults): {listing}")
    if name is None:
        return cls(int(num_envs), int(seed), **options)
    return cls(name, int(num_envs), int(seed), **options)


def make_config_env(env: Any, num_envs: int, seed: int) -> VecEnv:
    """The vector env a config's ``env`` section describes (an ``EnvConfig`` or its dict): ``make_vec_env`` of
    its ``id`` and ``options``, each observation stacked with the ones before it where ``frame_stack`` > 1
    (``r2ac.envs.stack``)."""
    get = env.get if isinstance(env, dict) else (lambda key, default=None: getattr(env, key, default))
    env_id, options, k = get("id"), dict(get("options") or {}), get("frame_stack", 1)
    if k != 1 and parse_env_id(env_id)[0] == "atari":
        raise ValueError(f"env.frame_stack={k!r} with {env_id!r}: Atari stacks its own frames "
                         "(env.options.frame_stack, 4 by default); leave env.frame_stack at 1")
    venv = make_vec_env(env_id, num_envs, seed, **options)
    try:
        return stack_frames(venv, k)
    except ValueError:
        venv.close()
        raise


def _register_gymnasium_envs() -> None:
    for env_id, entry in (("r2ac/TMaze-v0", "r2ac.envs.memory:TMazeEnv"),
                          ("r2ac/Watermaze-v0", "r2ac.envs.memory:WatermazeEnv")):
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry)


_register_gymnasium_envs()
