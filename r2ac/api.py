"""A trained agent for use outside r2ac: ``r2ac.load(run_dir)`` returns a :class:`Policy`.

    import r2ac
    policy = r2ac.load("runs/quickstart")                 # newest checkpoint; checkpoint=STEP for another
    env = r2ac.envs.make_config_env(policy.config.env, 4, seed=0)
    obs, state = env.reset(), policy.initial_state(4)
    reward = done = None
    while True:
        action, state = policy.act(obs, state, reward=reward, done=done)
        obs, reward, done, info = env.step(action)

``act`` takes a batch ``[B, *observation_shape]`` (or one observation, then returns one action) and the
state the previous call returned. The network's inputs besides the observation are the reward received on
arriving at ``obs`` and whether ``obs`` starts a new episode (``done`` of the step that produced it, with
same-step autoreset): pass them as ``reward=`` and ``done=`` (agents trained with ``model.reward_input``
use the reward). The state carries the core's recurrent state and the previous action; a ``done`` row
starts that env's memory afresh.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Tuple

import numpy as np
import torch

from r2ac.agent.distributions import categorical_sample
from r2ac.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, load_latest_checkpoint
from r2ac.config import Config, ConfigError, config_from_dict, upgrade_resolved

__all__ = ["Policy", "PolicyState", "initial_net", "load", "load_checkpoint_for", "run_dir_of_path"]


@dataclasses.dataclass
class PolicyState:
    """What :meth:`Policy.act` carries between calls (one row per env)."""

    core: Any                  # the recurrent core's state (no RTRL sensitivities: acting needs none)
    action: torch.Tensor       # [B] int64, the previous action (an input when model.prev_action_input)
    first: torch.Tensor        # [B] bool, rows whose next observation starts an episode


def run_dir_of_path(path: str) -> str:
    """The run directory of a run directory or of a checkpoint file in its ``checkpoints/``."""
    if os.path.isdir(path):
        return path
    return os.path.dirname(os.path.dirname(os.path.abspath(path)))


def load_checkpoint_for(path: str, checkpoint: Optional[int] = None) -> dict:
    """The checkpoint of a run directory (its newest, or the one at agent step ``checkpoint``) or a
    checkpoint file. Problems raise FileNotFoundError / CheckpointError with one line saying what to do."""
    if os.path.isfile(path):
        if checkpoint is not None:
            raise ValueError(f"{path} is a checkpoint file; --checkpoint picks one of a run directory's")
        return load_checkpoint(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such run directory or checkpoint file")
    if checkpoint is None:
        ckpt = load_latest_checkpoint(path)
        if ckpt is None:
            raise FileNotFoundError(f"{path} has no checkpoints (expected {path}/checkpoints/ckpt_*.pt)")
        return ckpt
    found = dict(list_checkpoints(path))
    if int(checkpoint) not in found:
        have = ", ".join(str(s) for s in sorted(found)) or "none"
        raise FileNotFoundError(f"{path} has no checkpoint at step {checkpoint} (checkpoints kept: {have}; "
                                "checkpoint.keep sets how many are kept)")
    return load_checkpoint(found[int(checkpoint)])


def _config_of(ckpt: dict, where: str) -> Config:
    if not isinstance(ckpt.get("config"), dict):
        raise CheckpointError(f"{where} holds no run config; it was not written by r2ac train")
    return config_from_dict(upgrade_resolved(ckpt["config"]))


class Policy:
    """A trained IMPALA/A2C agent: ``act(obs, state) -> (actions, state)`` on CPU (or ``device``)."""

    def __init__(self, net, config: Config, *, step: int = 0, checkpoint: str = "", greedy: bool = False,
                 seed: int = 0, device: str = "cpu"):
        self.net = net.to(device).eval()
        self.config = config
        self.step = int(step)
        self.checkpoint = checkpoint
        self.greedy = bool(greedy)
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed))
        self.num_actions = int(net.num_actions)
        self.observation_shape = tuple(net.observation_shape) if hasattr(net, "observation_shape") else None

    def initial_state(self, batch_size: int = 1) -> PolicyState:
        """The state before the first observation of ``batch_size`` envs."""
        core = self.net.initial_state(int(batch_size), device=self.device, sensitivities=False)
        return PolicyState(core, torch.zeros(batch_size, dtype=torch.int64, device=self.device),
                           torch.ones(batch_size, dtype=torch.bool, device=self.device))

    def act_with_logits(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                        greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, torch.Tensor]:
        """:meth:`act` that also returns the policy logits ``[B, num_actions]``."""
        action, new, out = self.act_with_outputs(obs, state, reward=reward, done=done, greedy=greedy)
        return action, new, out["policy_logits"]

    @torch.no_grad()
    def act_with_outputs(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
                         greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState, dict]:
        """:meth:`act` that also returns the network's outputs for ``obs``: ``policy_logits``
        ``[B, num_actions]``, ``baseline`` ``[B]`` (the value estimate) and ``core_output`` ``[B, N]`` (what the heads
        read), float32 (one observation: ``[1, ...]``)."""
        x = torch.as_tensor(np.ascontiguousarray(obs))
        single = self.observation_shape is not None and tuple(x.shape) == self.observation_shape
        if single:
            x = x.unsqueeze(0)
        B = x.shape[0]
        if state is None:
            state = self.initial_state(B)
        if state.action.shape[0] != B:
            raise ValueError(f"the state holds {state.action.shape[0]} envs but obs has {B}; "
                             f"use policy.initial_state({B})")
        r = torch.zeros(B) if reward is None else torch.as_tensor(np.asarray(reward, dtype=np.float32)).reshape(B)
        first = state.first.clone()
        if done is not None:
            first |= torch.as_tensor(np.asarray(done, dtype=bool)).reshape(B).to(self.device)
        x = x.to(self.device)
        feats = self.net.features(x.unsqueeze(0))[0]
        inputs = {"features": feats.unsqueeze(0), "reward": r.to(self.device).unsqueeze(0),
                  "action": state.action.unsqueeze(0), "done": first.unsqueeze(0)}
        out, core = self.net(inputs, state.core, sensitivities=False)
        out = {k: v[0].float() for k, v in out.items()}
        logits = out["policy_logits"]
        if self.greedy if greedy is None else greedy:
            action = logits.argmax(-1)
        else:
            action = categorical_sample(logits, self.generator)
        new = PolicyState(core, action, torch.zeros(B, dtype=torch.bool, device=self.device))
        a = action.cpu().numpy()
        return (a[0] if single else a), new, out

    def act(self, obs, state: Optional[PolicyState] = None, *, reward=None, done=None,
            greedy: Optional[bool] = None) -> Tuple[np.ndarray, PolicyState]:
        """Actions for ``obs`` (``[B, *observation_shape]``, or one observation) and the next state.
        ``reward``/``done``: what the env step that produced ``obs`` returned (None at the start)."""
        action, new, _ = self.act_with_logits(obs, state, reward=reward, done=done, greedy=greedy)
        return action, new

    def __repr__(self) -> str:
        c = self.config
        return (f"Policy({c.env.id}, {c.model.core}/{c.model.learning}, step={self.step}, "
                f"{'greedy' if self.greedy else 'sampled'} actions)")


def policy_from_checkpoint(ckpt: dict, cfg: Optional[Config] = None, *, greedy: bool = False, seed: int = 0,
                           device: str = "cpu", observation_shape=None, num_actions=None) -> Policy:
    """A :class:`Policy` from a loaded checkpoint (the env is built once to learn its shapes unless they
    are given)."""
    from r2ac.runtime import build_net

    where = ckpt.get("path", "the checkpoint")
    cfg = cfg or _config_of(ckpt, where)
    if cfg.algo == "ppo":
        raise ConfigError(f"{where} is an algo=ppo run; r2ac.load and r2ac eval serve IMPALA/A2C agents")
    if observation_shape is None or num_actions is None:
        from r2ac.envs import make_config_env

        venv = make_config_env(cfg.env, 1, cfg.seed)
        observation_shape, num_actions = venv.observation_shape, venv.num_actions
        venv.close()
    net = build_net(cfg, observation_shape, num_actions, load_stem=False)
    try:
        net.load_state_dict(ckpt["model"])
    except (KeyError, RuntimeError) as e:
        raise CheckpointError(f"{where}: its weights do not fit the network of its config "
                              f"({str(e).splitlines()[0]})") from None
    net.observation_shape = tuple(observation_shape)
    return Policy(net, cfg, step=int(ckpt.get("counters", {}).get("step", 0)), checkpoint=str(where),
                  greedy=greedy, seed=seed, device=device)


def initial_net(cfg: Config, net):
    """The network a run of ``cfg`` started from, built like ``net``: a run seeds torch with ``cfg.seed`` and
    builds its network before anything else draws from torch's RNG (tests/bench/test_cue_memory.py checks it
    on a real run)."""
    import torch

    from r2ac.runtime import resolve_model

    torch.manual_seed(cfg.seed)
    return type(net).from_config(resolve_model(cfg), net.observation_shape, net.num_actions,
                                 reward_clip=cfg.learner.reward_clip)


def load(path: str, checkpoint: Optional[int] = None, *, greedy: bool = False, seed: int = 0,
         device: str = "cpu") -> Policy:
    """The trained policy of a run directory (its newest checkpoint, or the one at agent step
    ``checkpoint``) or of a checkpoint file."""
    return policy_from_checkpoint(load_checkpoint_for(os.fspath(path), checkpoint), greedy=greedy, seed=seed,
                                  device=device)
