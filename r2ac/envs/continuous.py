"""Continuous-action and partially observable env kinds of the PPO agent of Elelimy et al. 2024: Box actions, MuJoCo
with positions or velocities hidden (MuJoCo-P / MuJoCo-V), and the POPGym memory tasks.

Ids::

    gymc:<id>              any Gymnasium env, Discrete, MultiDiscrete or Box actions (e.g. gymc:Pendulum-v1)
    mujoco:<Env-vN>        a Gymnasium MuJoCo env, full observation       (e.g. mujoco:HalfCheetah-v5)
    mujoco-p:<Env-vN>      MuJoCo-P: positions (and angles) only, velocities hidden
    mujoco-v:<Env-vN>      MuJoCo-V: velocities only, positions hidden
    popgym:<Name>          a POPGym task by class name (e.g. popgym:RepeatPreviousEasy, popgym:CountRecallEasy)

All of them follow the ``VecEnv`` contract (same-step autoreset) and add:

- ``action_kind``: ``"discrete"`` or ``"continuous"``; continuous envs have ``num_actions = 0`` and
  ``action_dim``. The agent acts in [-1, 1] per dimension: ``step`` clips the action to [-1, 1] and maps
  it affinely onto the env's [low, high] (so the policy never sees the env's scale).
- ``info["final_observation"]``: the last observation of an episode that ended at this step (zeros
  elsewhere), already masked, so a learner can bootstrap V(final observation) at a time-limit truncation.

MuJoCo-P / MuJoCo-V masks (the split of the MuJoCo POMDP benchmark of Ni et al. 2022 used by Elelimy et al. 2024:
-P keeps joint positions and angles, -V keeps joint velocities; everything that is neither, e.g. contact
forces, is dropped in both: our choice). Indices into the default Gymnasium v5 observation, read from each env's
``_get_obs`` in gymnasium 1.x and checked against ``data.qpos`` / ``data.qvel`` in
``tests/envs/test_continuous.py``:

    env                     obs  positions (-P)                    velocities (-V)   dropped
    HalfCheetah-v5          17   0-7   qpos[1:]                    8-16  qvel        -
    Hopper-v5               11   0-4   qpos[1:]                    5-10  qvel        -
    Walker2d-v5             17   0-7   qpos[1:]                    8-16  qvel        -
    Ant-v5                  105  0-12  qpos[2:]                    13-26 qvel        27-104 contact forces
    Swimmer-v5              8    0-2   qpos[2:]                    3-7   qvel        -
    Humanoid(Standup)-v5    348  0-21  qpos[2:]                    22-44 qvel        45-347 cinert, cvel,
                                                                                     actuator/contact forces
    InvertedPendulum-v5     4    0-1   qpos                        2-3   qvel        -
    InvertedDoublePendulum  9    0-4   x, sin, cos of the angles   5-7   qvel        8 constraint force
    Reacher-v5              10   0-5, 8-9 cos, sin, target, tip-target  6-7 qvel     -
    Pusher-v5               23   0-6, 14-22 qpos[:7], body positions    7-13 qvel[:7] -

The qpos/qvel family (HalfCheetah ... Humanoid) is computed from the model (nq, nv) and the env's
``exclude_current_positions_from_observation`` option, so that option and the v4 versions work too.
"""

from __future__ import annotations

from typing import Callable

import gymnasium
import numpy as np

from r2ac.envs.gym_env import GymVecEnv, resolve_gym_factory

__all__ = ["BoxGymVecEnv", "MujocoVecEnv", "MujocoPVecEnv", "MujocoVVecEnv", "PopGymVecEnv", "mujoco_layout",
           "popgym_names", "popgym_class"]

# env class -> how many leading qpos entries the observation skips when exclude_current_positions is on
_QPOS_SKIP = {"HalfCheetahEnv": 1, "HopperEnv": 1, "Walker2dEnv": 1, "AntEnv": 2, "SwimmerEnv": 2,
              "HumanoidEnv": 2, "HumanoidStandupEnv": 2, "InvertedPendulumEnv": 0}
_FIXED_LAYOUTS = {
    "InvertedDoublePendulumEnv": (list(range(0, 5)), [5, 6, 7]),
    "ReacherEnv": ([0, 1, 2, 3, 4, 5, 8, 9], [6, 7]),
    "PusherEnv": (list(range(0, 7)) + list(range(14, 23)), list(range(7, 14))),
}


def mujoco_layout(env: gymnasium.Env) -> dict[str, list[int]]:
    """``{"position": [...], "velocity": [...], "other": [...]}``: indices into the observation of a
    Gymnasium MuJoCo env (see the module docstring for the table)."""
    base = env.unwrapped
    name = type(base).__name__
    dim = int(np.prod(base.observation_space.shape))
    if name in _QPOS_SKIP:
        nq, nv = int(base.model.nq), int(base.model.nv)
        exclude = bool(getattr(base, "_exclude_current_positions_from_observation", True))
        n_pos = nq - (_QPOS_SKIP[name] if exclude else 0)
        position, velocity = list(range(n_pos)), list(range(n_pos, n_pos + nv))
    elif name in _FIXED_LAYOUTS:
        position, velocity = _FIXED_LAYOUTS[name]
    else:
        raise ValueError(f"no position/velocity split known for MuJoCo env class {name}; known: "
                         f"{', '.join(sorted(list(_QPOS_SKIP) + list(_FIXED_LAYOUTS)))}")
    used = set(position) | set(velocity)
    if max(used) >= dim:
        raise ValueError(f"{name}: observation has {dim} entries, fewer than its layout expects")
    return {"position": position, "velocity": velocity, "other": [i for i in range(dim) if i not in used]}


class BoxGymVecEnv(GymVecEnv):
    """``gymc:<id>``: ``gym:<id>`` that also takes Box actions and reports final observations."""

    box_actions = True
    final_observations = True


class MujocoVecEnv(BoxGymVecEnv):
    """``mujoco:<Env-vN>``: a Gymnasium MuJoCo env; subclasses keep part of the observation."""

    keep: str | None = None  # "position" | "velocity" | None (all)

    def _factory(self, env_id: str) -> Callable[..., gymnasium.Env]:
        if ":" in env_id:
            raise ValueError(f"MuJoCo env {env_id!r}: give a registered Gymnasium id such as HalfCheetah-v5")
        return resolve_gym_factory(env_id)

    def _observation_indices(self, env: gymnasium.Env, shape: tuple[int, ...]):
        if self.keep is None:
            return None
        if not hasattr(env.unwrapped, "model"):
            raise ValueError(f"{self.env_id!r} is not a MuJoCo env (no .model); mujoco-p:/mujoco-v: mask "
                             "MuJoCo observations")
        return mujoco_layout(env)[self.keep]


class MujocoPVecEnv(MujocoVecEnv):
    """``mujoco-p:<Env-vN>``: positions only (velocities hidden)."""

    keep = "position"


class MujocoVVecEnv(MujocoVecEnv):
    """``mujoco-v:<Env-vN>``: velocities only (positions hidden)."""

    keep = "velocity"


def popgym_names() -> list[str]:
    """The POPGym task class names this install offers (e.g. RepeatPreviousEasy)."""
    from popgym.envs import ALL  # imported lazily: popgym is optional

    return sorted(cls.__name__ for cls in ALL)


class PopGymVecEnv(BoxGymVecEnv):
    """``popgym:<Name>``: a POPGym task by its class name (case-insensitive). Observations are flattened
    (a Discrete card to a one-hot, MultiDiscrete to concatenated one-hots); MultiDiscrete actions become
    one discrete action over their product; the pendulum tasks have Box actions. Options go to the
    task's constructor."""

    def _factory(self, env_id: str) -> Callable[..., gymnasium.Env]:
        return popgym_class(env_id)


def popgym_class(env_id: str) -> Callable[..., gymnasium.Env]:
    """The POPGym task class of ``env_id``: a class name (case-insensitive) or a ``popgym-<Name>-v0`` id."""
    try:
        from popgym.envs import ALL
    except ImportError as exc:  # pragma: no cover - popgym is installed here
        raise ValueError(f"popgym:{env_id} needs the popgym package (pip install popgym): {exc}") from exc
    by_name = {cls.__name__.lower(): cls for cls in ALL}
    by_name.update({spec["id"].lower(): cls for cls, spec in ALL.items()})  # popgym-<Name>-v0 too
    cls = by_name.get(env_id.lower())
    if cls is None:
        raise ValueError(f"unknown POPGym task {env_id!r}; available: {', '.join(popgym_names())}")
    return cls

