"""PPO with stored RTRL traces: seed 001's agent (Elelimy et al., Algorithm 1, App. F and G).

Network (App. G, Fig. 20): observation -> a 64-unit feed-forward layer (tanh) -> the recurrent core (any
core of ``make_core``) -> two separate heads, actor and critic, each two 64-unit tanh layers and a
linear output. Actions: categorical (discrete) or a diagonal Gaussian with a state-independent learned
log-std (continuous; the env maps [-1, 1] onto its bounds, see ``r2ac.envs.continuous``).

Algorithm 1, as implemented here:

    loop
        roll out L steps in each of B envs with the current policy; store for every step t its network
        input x_t, the reset flag, the action, log pi_old(a_t), V_old(x_t), reward, done, *and the core
        state before step t including its RTRL sensitivities* S(t-1) (the traces; "stale" once the
        weights move)
        compute GAE advantages and value targets (lambda 0.95, gamma 0.99)
        for epoch = 1..k
            shuffle the L*B steps (or the length-C chunks, see below) and split them into m minibatches
            for each minibatch: run the core ONE step from each stored state s(t-1) with its stored
                S(t-1), compute the PPO loss (clipped surrogate, clipped value loss, entropy bonus) and
                call backward: identity 1 (``r2ac.cores.rtrl``) adds dL/ds(t-1) * S(t-1) to the recurrent
                parameters' gradient, so each step gets its untruncated RTRL gradient given the stored
                traces; clip the global gradient norm (0.5); one Adam step
            [optional, refresh_traces] re-run the network over the rollout with the current weights from
                the rollout's stored initial state: new states, traces, values; recompute advantages

Because every step carries its own state and traces, minibatches can mix steps from any time and env.
Cores without RTRL (GRU, LSTM: ``learning="tbptt"``) have no traces: they train on chunks of C
consecutive steps (``sequence_length``), each re-run from its stored (stale) hidden state with the gradient
truncated there, the usual recurrent PPO. With RTRL, C = 1 is the paper's scheme; C > 1 is also exact
(identity 1 at the chunk start plus BPTT inside it).

Memory: the stored traces cost L * B * (sensitivity size) floats; for the RTU with n units and d inputs
that is 2 n d + 4 n floats per step for the linear variant (dc/dW2 = i dc/dW1 is not stored) and
4 n d + 4 n for the nonlinear one (``trace_memory``).

Time limits: where an episode is cut by a time limit (``info["truncated"]``) and the env reports its final
observation (``info["final_observation"]``, the ``r2ac.envs.continuous`` kinds), the learner bootstraps
with gamma * V(final observation) folded into that step's reward; envs without it treat truncation as
termination.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from r2ac.agent.learner import NonFiniteLossError
from r2ac.agent.losses import gae_advantages, ppo_clipped_surrogate_loss, ppo_value_loss
from r2ac.cores import make_core
from r2ac.cores.base import State

__all__ = ["PPONet", "RunningMeanStd", "Rollout", "RolloutCollector", "PPOLearner", "evaluate_chunks",
           "ppo_objective", "rerun_rollout", "trace_memory", "action_spec", "compute_advantages", "gather"]

_LOG_2PI = math.log(2 * math.pi)


# --------------------------------------------------------------------------------------------------
# Normalisers
# --------------------------------------------------------------------------------------------------

class RunningMeanStd(nn.Module):
    """Running mean and variance of a stream of vectors (float64 buffers, saved in the state dict),
    merged batch by batch with the parallel-variance formula (Chan et al. 1979)."""

    def __init__(self, size: int = 1, epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(float(epsilon), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.detach().to(torch.float64).reshape(-1, self.mean.numel())
        n = x.shape[0]
        if n == 0:
            return
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * n + delta.pow(2) * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: Tensor, clip: float = 10.0, eps: float = 1e-8) -> Tensor:
        y = (x.to(torch.float64) - self.mean) / torch.sqrt(self.var + eps)
        return y.clamp(-clip, clip).to(x.dtype)


# --------------------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------------------

def _layer(d_in: int, d_out: int, gain: float) -> nn.Linear:
    lin = nn.Linear(d_in, d_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


def _mlp(d_in: int, hidden: Sequence[int], d_out: Optional[int], out_gain: float) -> nn.Sequential:
    layers: List[nn.Module] = []
    for h in hidden:
        layers += [_layer(d_in, h, math.sqrt(2)), nn.Tanh()]
        d_in = h
    if d_out is not None:
        layers.append(_layer(d_in, d_out, out_gain))
    return nn.Sequential(*layers)


def action_spec(venv) -> Tuple[str, int]:
    """``("discrete", num_actions)`` or ``("continuous", action_dim)`` of a VecEnv."""
    kind = getattr(venv, "action_kind", "discrete")
    return (kind, int(venv.action_dim)) if kind == "continuous" else ("discrete", int(venv.num_actions))


class PPONet(nn.Module):
    """Encoder (tanh) -> recurrent core -> separate actor and critic heads (tanh MLPs).

    ``input_size``: features of the network input x_t (the normalised observation, plus the previous
    reward and action where enabled: the collector builds x_t). ``obs_size``: entries of x_t that are the
    observation (the normaliser's size). ``encoder=()`` feeds x_t to the core directly.

    Orthogonal initialisation (gain sqrt 2 for hidden layers, 0.01 for the policy output, 1 for the value
    output; zero biases); the core keeps its own initialisation.
    """

    def __init__(self, input_size: int, action_kind: str, action_dim: int, *, core: str = "rtu",
                 hidden_size: int = 64, learning: str = "rtrl", core_options: Optional[dict] = None,
                 encoder: Sequence[int] = (64,), head_hidden: Sequence[int] = (64, 64),
                 log_std_init: float = 0.0, obs_size: Optional[int] = None):
        super().__init__()
        if action_kind not in ("discrete", "continuous"):
            raise ValueError(f"action_kind must be 'discrete' or 'continuous', got {action_kind!r}")
        if action_dim < 1:
            raise ValueError(f"action_dim must be >= 1, got {action_dim}")
        self.input_size, self.action_kind, self.action_dim = int(input_size), action_kind, int(action_dim)
        self.encoder = _mlp(self.input_size, tuple(encoder), None, 1.0)
        d = tuple(encoder)[-1] if len(encoder) else self.input_size
        self.core = make_core(core, d, hidden_size, learning=learning, **(core_options or {}))
        y = self.core.output_size
        self.actor = _mlp(y, tuple(head_hidden), self.action_dim, 0.01)
        self.critic = _mlp(y, tuple(head_hidden), 1, 1.0)
        if action_kind == "continuous":
            self.log_std = nn.Parameter(torch.full((self.action_dim,), float(log_std_init)))
        self.obs_rms = RunningMeanStd(obs_size or self.input_size)
        self.ret_rms = RunningMeanStd(1)

    # -- state -----------------------------------------------------------------------------------
    def initial_state(self, batch_size: int, device=None, sensitivities: bool = True) -> State:
        return self.core.initial_state(batch_size, device=device, sensitivities=sensitivities)

    # -- forward ---------------------------------------------------------------------------------
    def forward(self, x: Tensor, state: State, reset: Tensor, return_state: bool = True,
                sensitivities: bool = True):
        """x [T, B, input_size], reset [T, B] bool (step t starts an episode). Returns
        ``({"policy": [T, B, A] logits or Gaussian means, "value": [T, B]}, next_state)``."""
        y, state = self.core(self.encoder(x), state, reset, return_state=return_state,
                             sensitivities=sensitivities)
        return {"policy": self.actor(y), "value": self.critic(y).squeeze(-1)}, state

    # -- the action distribution -----------------------------------------------------------------
    def log_prob(self, policy: Tensor, action: Tensor) -> Tensor:
        if self.action_kind == "discrete":
            return F.log_softmax(policy, -1).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        log_std = self.log_std.to(policy.dtype)
        z = (action.to(policy.dtype) - policy) * torch.exp(-log_std)
        return (-0.5 * z * z - log_std - 0.5 * _LOG_2PI).sum(-1)

    def entropy(self, policy: Tensor) -> Tensor:
        if self.action_kind == "discrete":
            logp = F.log_softmax(policy, -1)
            return -(logp.exp() * logp).sum(-1)
        per_dim = 0.5 + 0.5 * _LOG_2PI + self.log_std.to(policy.dtype)
        return per_dim.sum().expand(policy.shape[:-1])

    @torch.no_grad()
    def sample(self, policy: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """Actions [*, ] (int64) or [*, A] (float, unclipped) drawn from pi(.|policy)."""
        if self.action_kind == "discrete":
            probs = torch.softmax(policy.reshape(-1, policy.shape[-1]).float(), -1)
            return torch.multinomial(probs, 1, generator=generator).reshape(policy.shape[:-1])
        noise = torch.randn(policy.shape, generator=generator, dtype=policy.dtype, device=policy.device)
        return policy + torch.exp(self.log_std.to(policy.dtype)) * noise


def trace_memory(net: PPONet, rollout_length: int, num_envs: int, bytes_per_float: int = 4) -> Dict[str, float]:
    """What storing the per-step core state costs: floats per step (hidden, sensitivities) and the total
    bytes of ``rollout_length * num_envs`` stored states."""
    hidden = sum(math.prod(s) for s in net.core.hidden_spec().values())
    spec = net.core.state_spec(sensitivities=True)
    sens = sum(math.prod(spec[k]) for k in net.core.sensitivity_keys)
    steps = int(rollout_length) * int(num_envs)
    return {"hidden_floats_per_step": float(hidden), "sensitivity_floats_per_step": float(sens),
            "bytes": float(steps * (hidden + sens) * bytes_per_float),
            "sensitivity_bytes": float(steps * sens * bytes_per_float)}


# --------------------------------------------------------------------------------------------------
# Rollout storage and collection
# --------------------------------------------------------------------------------------------------

@dataclass
class Rollout:
    """L steps of B envs, time-major. Step t: input x[t] (reset[t]: an episode starts at t), action[t],
    reward[t] and done[t] (the episode ended with this transition), and the core state *before* step t
    (``states[k][t]``, with the RTRL sensitivities)."""

    x: Tensor                    # [L, B, D] network inputs
    reset: Tensor                # [L, B] bool
    states: Dict[str, Tensor]    # k -> [L, B, *spec]: core state (+ sensitivities) before step t
    action: Tensor               # [L, B] int64 | [L, B, A]
    log_prob: Tensor             # [L, B] log pi_old(a_t | history)
    value: Tensor                # [L, B] V(history up to t) (refreshed by rerun_rollout)
    reward: Tensor               # [L, B] (scaled when rewards are normalised)
    done: Tensor                 # [L, B] bool: the episode ended with step t (terminated or truncated)
    truncated: Tensor            # [L, B] bool: ... by a time limit, with its final observation known
    final_x: Tensor              # [L, B, D] input built from the final observation where truncated
    final_value: Tensor          # [L, B] V(final observation) where truncated, else 0
    next_x: Tensor               # [B, D] the input after the last step (bootstrap)
    next_reset: Tensor           # [B] bool
    final_state: Dict[str, Tensor]  # k -> [B, *spec]: core state after the last step
    bootstrap_value: Tensor      # [B]
    advantages: Optional[Tensor] = None
    returns: Optional[Tensor] = None
    episodes: List[Tuple[float, int]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.x.shape[0]

    @property
    def num_envs(self) -> int:
        return self.x.shape[1]


class RolloutCollector:
    """Steps a VecEnv with the current policy for ``rollout_length`` steps per env and stores, for every
    step, the core state with its RTRL sensitivities (one core step per env step, sensitivities on).

    It carries the core state, the last observation and the reset flags between rollouts; after
    ``restart()`` (or on creation) every env starts a new episode from a zero state.
    """

    def __init__(self, net: PPONet, venv, rollout_length: int, *, discount: float = 0.99,
                 generator: Optional[torch.Generator] = None, reward_input: bool = False,
                 prev_action_input: bool = False, normalize_observations: bool = False,
                 normalize_rewards: bool = False, obs_clip: float = 10.0, reward_clip: float = 10.0):
        self.net, self.venv = net, venv
        self.L, self.B = int(rollout_length), int(venv.num_envs)
        self.discount = float(discount)
        self.generator = generator
        self.reward_input, self.prev_action_input = bool(reward_input), bool(prev_action_input)
        self.normalize_observations, self.normalize_rewards = bool(normalize_observations), bool(normalize_rewards)
        self.obs_clip, self.reward_clip = float(obs_clip), float(reward_clip)
        kind, dim = action_spec(venv)
        if (kind, dim) != (net.action_kind, net.action_dim):
            raise ValueError(f"the env has {kind} actions of size {dim}, the network {net.action_kind} of "
                             f"size {net.action_dim}")
        self.obs_size = int(np.prod(venv.observation_shape))  # observations are flattened
        self._obs_scale = 1.0 / 255.0 if np.dtype(venv.observation_dtype) == np.uint8 else 1.0  # pixels to [0, 1]
        self.restart()

    @staticmethod
    def input_size(obs_size: int, action_kind: str, action_dim: int, reward_input: bool,
                   prev_action_input: bool) -> int:
        return obs_size + int(reward_input) + (action_dim if prev_action_input else 0)

    @property
    def _ref(self) -> Tensor:
        return next(self.net.parameters())

    def restart(self) -> None:
        ref = self._ref
        self.state = self.net.initial_state(self.B, device=ref.device)
        self.obs = self._obs(self.venv.reset())
        self.reset = torch.ones(self.B, dtype=torch.bool, device=ref.device)
        self.prev_reward = torch.zeros(self.B, dtype=ref.dtype, device=ref.device)
        shape = (self.B,) if self.net.action_kind == "discrete" else (self.B, self.net.action_dim)
        self.prev_action = torch.zeros(shape, dtype=torch.int64 if self.net.action_kind == "discrete" else ref.dtype,
                                       device=ref.device)
        self.discounted_return = torch.zeros(self.B, dtype=torch.float64)

    def _obs(self, obs: np.ndarray) -> Tensor:
        ref = self._ref
        x = torch.as_tensor(np.asarray(obs).reshape(self.B, -1), device=ref.device).to(ref.dtype)
        return x * self._obs_scale if self._obs_scale != 1.0 else x

    def make_input(self, obs: Tensor, prev_reward: Tensor, prev_action: Tensor, reset: Tensor,
                   update_stats: bool = True) -> Tensor:
        """x_t = [normalised obs, previous reward, previous action] (the previous ones zero at a reset)."""
        if self.normalize_observations:
            if update_stats:
                self.net.obs_rms.update(obs)
            obs = self.net.obs_rms.normalize(obs, self.obs_clip)
        parts = [obs]
        keep = (~reset).to(obs.dtype)
        if self.reward_input:
            parts.append((prev_reward.to(obs.dtype) * keep).unsqueeze(-1))
        if self.prev_action_input:
            if self.net.action_kind == "discrete":
                a = F.one_hot(prev_action.long(), self.net.action_dim).to(obs.dtype)
            else:
                a = prev_action.to(obs.dtype).clamp(-1, 1)
            parts.append(a * keep.unsqueeze(-1))
        return torch.cat(parts, -1) if len(parts) > 1 else obs

    def _scale_rewards(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Divide by the running std of the discounted return (as Gymnasium's NormalizeReward)."""
        if not self.normalize_rewards:
            return reward
        self.discounted_return = self.discounted_return * self.discount + torch.as_tensor(reward, dtype=torch.float64)
        self.net.ret_rms.update(self.discounted_return.unsqueeze(-1))
        self.discounted_return[torch.as_tensor(done)] = 0.0
        scaled = reward / math.sqrt(float(self.net.ret_rms.var) + 1e-8)
        return np.clip(scaled, -self.reward_clip, self.reward_clip)

    @torch.no_grad()
    def collect(self) -> Rollout:
        net, L, B = self.net, self.L, self.B
        ref = self._ref
        dev, dt = ref.device, ref.dtype
        spec = net.core.state_spec(sensitivities=True)
        states = {k: torch.empty((L, B) + tuple(spec[k]), dtype=dt, device=dev) for k in self.state}
        D = net.input_size
        x_all = torch.empty((L, B, D), dtype=dt, device=dev)
        final_x = torch.zeros((L, B, D), dtype=dt, device=dev)
        final_value = torch.zeros((L, B), dtype=dt, device=dev)
        reset_all = torch.empty((L, B), dtype=torch.bool, device=dev)
        act_shape = (L, B) if net.action_kind == "discrete" else (L, B, net.action_dim)
        actions = torch.empty(act_shape, dtype=self.prev_action.dtype, device=dev)
        log_prob = torch.empty((L, B), dtype=dt, device=dev)
        value = torch.empty((L, B), dtype=dt, device=dev)
        reward = torch.empty((L, B), dtype=dt, device=dev)
        done_all = torch.empty((L, B), dtype=torch.bool, device=dev)
        trunc_all = torch.zeros((L, B), dtype=torch.bool, device=dev)
        episodes: List[Tuple[float, int]] = []
        for t in range(L):
            for k, v in self.state.items():
                states[k][t] = v
            x = self.make_input(self.obs, self.prev_reward, self.prev_action, self.reset)
            x_all[t], reset_all[t] = x, self.reset
            out, self.state = net(x[None], self.state, self.reset[None])  # one step, traces on
            policy = out["policy"][0]
            a = net.sample(policy, self.generator)
            actions[t], log_prob[t], value[t] = a, net.log_prob(policy, a), out["value"][0]
            a_env = a.cpu().numpy() if net.action_kind == "discrete" else a.cpu().to(torch.float64).numpy()
            obs, r, done, info = self.venv.step(a_env)
            r = np.asarray(r, dtype=np.float64)
            done = np.asarray(done, dtype=bool)
            ended = ~np.isnan(info["episode_return"])
            for b in np.flatnonzero(ended):
                episodes.append((float(info["episode_return"][b]), int(info["episode_length"][b])))
            reward[t] = torch.as_tensor(self._scale_rewards(r, done), device=dev)
            done_t = torch.as_tensor(done, device=dev)
            done_all[t] = done_t
            trunc = np.asarray(info.get("truncated", np.zeros(B, bool)), dtype=bool) & done
            if trunc.any() and "final_observation" in info:
                trunc_t = torch.as_tensor(trunc, device=dev)
                fx = self.make_input(self._obs(info["final_observation"]), torch.as_tensor(r, device=dev).to(dt),
                                     a, torch.zeros(B, dtype=torch.bool, device=dev), update_stats=False)
                fout, _ = net(fx[None], self.state, torch.zeros(1, B, dtype=torch.bool, device=dev),
                              return_state=False, sensitivities=False)
                final_x[t] = torch.where(trunc_t[:, None], fx, torch.zeros_like(fx))
                final_value[t] = torch.where(trunc_t, fout["value"][0], torch.zeros_like(fout["value"][0]))
                trunc_all[t] = trunc_t
            self.obs = self._obs(obs)
            self.reset = done_t
            self.prev_reward = torch.as_tensor(r, device=dev).to(dt)
            self.prev_action = a
        next_x = self.make_input(self.obs, self.prev_reward, self.prev_action, self.reset, update_stats=False)
        out, _ = net(next_x[None], self.state, self.reset[None], return_state=False, sensitivities=False)
        return Rollout(x=x_all, reset=reset_all, states=states, action=actions, log_prob=log_prob, value=value,
                       reward=reward, done=done_all, truncated=trunc_all, final_x=final_x, final_value=final_value,
                       next_x=next_x, next_reset=self.reset.clone(),
                       final_state={k: v.clone() for k, v in self.state.items()},
                       bootstrap_value=out["value"][0], episodes=episodes)


# --------------------------------------------------------------------------------------------------
# Re-running a rollout (the optional refresh of Algorithm 1)
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def rerun_rollout(net: PPONet, ro: Rollout) -> Dict:
    """Re-run the network over a stored rollout with the current weights, from the rollout's stored
    initial state (``ro.states[k][0]``), one step at a time with sensitivities on: returns the fresh
    ``states`` ([L, B, ...] before each step), ``value`` [L, B], ``final_value`` (V(final observation)
    where truncated), ``final_state`` and ``bootstrap_value``."""
    L, B = ro.x.shape[:2]
    state = {k: v[0].clone() for k, v in ro.states.items()}
    states = {k: torch.empty_like(v) for k, v in ro.states.items()}
    value = torch.empty_like(ro.value)
    final_value = torch.zeros_like(ro.final_value)
    no_reset = torch.zeros(1, B, dtype=torch.bool, device=ro.x.device)
    for t in range(L):
        for k, v in state.items():
            states[k][t] = v
        out, state = net(ro.x[t][None], state, ro.reset[t][None])
        value[t] = out["value"][0]
        if ro.truncated[t].any():
            fout, _ = net(ro.final_x[t][None], state, no_reset, return_state=False, sensitivities=False)
            final_value[t] = torch.where(ro.truncated[t], fout["value"][0], torch.zeros_like(fout["value"][0]))
    out, _ = net(ro.next_x[None], state, ro.next_reset[None], return_state=False, sensitivities=False)
    return {"states": states, "value": value, "final_value": final_value, "final_state": state,
            "bootstrap_value": out["value"][0]}


def compute_advantages(ro: Rollout, discount: float, gae_lambda: float) -> None:
    """GAE (``losses.gae_advantages``) with gamma * V(final observation) added to the reward of steps cut
    by a time limit; sets ``ro.advantages`` and ``ro.returns`` (= advantages + values)."""
    rewards = ro.reward + discount * ro.final_value * ro.truncated.to(ro.reward.dtype)
    ro.advantages = gae_advantages(rewards, ro.value, ro.done, ro.bootstrap_value, discount, gae_lambda)
    ro.returns = ro.advantages + ro.value


# --------------------------------------------------------------------------------------------------
# Loss on a minibatch of chunks
# --------------------------------------------------------------------------------------------------

def evaluate_chunks(net: PPONet, ro: Rollout, starts: Tensor, envs: Tensor, length: int):
    """Run the network over K chunks of ``length`` steps: chunk j covers steps starts[j] ..
    starts[j] + length - 1 of env envs[j] and starts from the stored state before starts[j] (with its
    RTRL sensitivities: identity 1 makes the gradient the untruncated one given those traces; without
    them, the gradient is truncated at the chunk start). Returns (outputs [length, K], index (t [length, K],
    b [K]))."""
    t = starts[None, :] + torch.arange(length, device=starts.device)[:, None]
    state = {k: v[starts, envs] for k, v in ro.states.items()}
    out, _ = net(ro.x[t, envs], state, ro.reset[t, envs], return_state=False)
    return out, (t, envs)


def ppo_objective(net: PPONet, out: Dict[str, Tensor], batch: Dict[str, Tensor], *, clip: float = 0.2,
                  value_clip: Optional[float] = 0.5, value_cost: float = 0.5, entropy_cost: float = 0.0,
                  normalize_advantages: bool = True) -> Tuple[Tensor, Dict[str, float]]:
    """L = L_clip + value_cost * L_V + entropy_cost * L_H, each a mean over the minibatch's steps
    (``losses.ppo_clipped_surrogate_loss``, ``losses.ppo_value_loss``; advantages normalised over the
    minibatch). ``batch``: action, log_prob (old), advantages, returns, value (old), shaped like out."""
    logp = net.log_prob(out["policy"], batch["action"])
    adv = batch["advantages"]
    if normalize_advantages and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = ppo_clipped_surrogate_loss(logp, batch["log_prob"], adv, clip)
    vl = ppo_value_loss(out["value"], batch["value"], batch["returns"], value_clip if value_clip else None)
    ent = net.entropy(out["policy"])
    loss = pg + value_cost * vl - entropy_cost * ent.mean()
    with torch.no_grad():
        log_ratio = logp - batch["log_prob"]
        ratio = log_ratio.exp()
        stats = {"pg_loss": pg.item(), "value_loss": vl.item(), "entropy": ent.mean().item(),
                 "approx_kl": ((ratio - 1) - log_ratio).mean().item(),
                 "clip_fraction": ((ratio - 1).abs() > clip).to(torch.float32).mean().item()}
    return loss, stats


def gather(ro: Rollout, t: Tensor, b: Tensor) -> Dict[str, Tensor]:
    """The per-step training targets at (t [C, K], b [K])."""
    return {"action": ro.action[t, b], "log_prob": ro.log_prob[t, b], "advantages": ro.advantages[t, b],
            "returns": ro.returns[t, b], "value": ro.value[t, b]}


# --------------------------------------------------------------------------------------------------
# Learner
# --------------------------------------------------------------------------------------------------

class PPOLearner:
    """k epochs of m shuffled minibatches per rollout, Adam, global gradient-norm clip; optional refresh
    of the stored traces (and values, advantages) after every epoch but the last.

    A minibatch whose loss or gradient norm is not finite is skipped (no optimizer step); more than
    ``max_nonfinite_updates`` skipped in a row raise :class:`r2ac.agent.learner.NonFiniteLossError`."""

    def __init__(self, net: PPONet, *, epochs: int = 10, minibatches: int = 32, clip: float = 0.2,
                 value_clip: float = 0.5, value_cost: float = 0.5, entropy_cost: float = 0.0,
                 learning_rate: float = 3e-4, adam_eps: float = 1e-5, grad_norm_clip: float = 0.5,
                 gae_lambda: float = 0.95, discount: float = 0.99, refresh_traces: bool = False,
                 sequence_length: int = 1, normalize_advantages: bool = True, max_nonfinite_updates: int = 10):
        self.net = net
        self.epochs, self.minibatches = int(epochs), int(minibatches)
        self.clip, self.value_clip, self.value_cost = float(clip), float(value_clip), float(value_cost)
        self.entropy_cost, self.grad_norm_clip = float(entropy_cost), float(grad_norm_clip)
        self.gae_lambda, self.discount = float(gae_lambda), float(discount)
        self.refresh_traces = bool(refresh_traces)
        self.sequence_length = int(sequence_length)
        self.normalize_advantages = bool(normalize_advantages)
        self.max_nonfinite_updates = int(max_nonfinite_updates)
        if self.sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        self.optimizer = torch.optim.Adam(net.parameters(), lr=learning_rate, eps=adam_eps)
        self.updates = 0  # applied optimizer steps
        self.iterations = 0  # rollouts trained on
        self.skipped = 0  # minibatch updates skipped for a non-finite loss or gradient
        self.nonfinite_in_row = 0

    def chunks(self, L: int, B: int) -> int:
        C = self.sequence_length
        if L % C:
            raise ValueError(f"ppo.rollout_length {L} must be a multiple of the sequence length {C}")
        return (L // C) * B

    def refresh(self, ro: Rollout) -> None:
        """Recompute states, traces and values with the current weights; recompute advantages. (The
        collector's carried state, where the next rollout starts, stays as acting computed it.)"""
        new = rerun_rollout(self.net, ro)
        ro.states, ro.value, ro.final_value = new["states"], new["value"], new["final_value"]
        ro.final_state, ro.bootstrap_value = new["final_state"], new["bootstrap_value"]
        compute_advantages(ro, self.discount, self.gae_lambda)

    def update(self, ro: Rollout, generator: Optional[torch.Generator] = None) -> Dict[str, float]:
        L, B = ro.x.shape[:2]
        C = self.sequence_length
        n_chunks = self.chunks(L, B)
        m = min(self.minibatches, n_chunks)
        if ro.advantages is None:
            compute_advantages(ro, self.discount, self.gae_lambda)
        with torch.no_grad():
            y, v = ro.returns.flatten(), ro.value.flatten()
            explained = (1 - (y - v).var() / y.var()).item() if y.var() > 0 else float("nan")
        params = [p for p in self.net.parameters() if p.requires_grad]
        clip = self.grad_norm_clip if self.grad_norm_clip > 0 else math.inf
        sums: Dict[str, float] = {}
        count = 0
        self.net.train()
        for epoch in range(self.epochs):
            perm = torch.randperm(n_chunks, generator=generator).to(ro.x.device)
            for idx in torch.tensor_split(perm, m):
                starts, envs = (idx // B) * C, idx % B
                out, (t, b) = evaluate_chunks(self.net, ro, starts, envs, C)
                loss, stats = ppo_objective(self.net, out, gather(ro, t, b), clip=self.clip,
                                            value_clip=self.value_clip, value_cost=self.value_cost,
                                            entropy_cost=self.entropy_cost,
                                            normalize_advantages=self.normalize_advantages)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                if not math.isfinite(grad_norm) or not math.isfinite(loss.item()):
                    self.optimizer.zero_grad(set_to_none=True)
                    sums["skipped_updates"] = sums.get("skipped_updates", 0.0) + 1
                    self._skip("loss" if not math.isfinite(loss.item()) else "gradient")
                    continue
                self.optimizer.step()
                self.nonfinite_in_row = 0
                self.updates += 1
                stats["grad_norm"] = grad_norm
                stats["loss"] = loss.item()
                for k, val in stats.items():
                    sums[k] = sums.get(k, 0.0) + val
                count += 1
            if self.refresh_traces and epoch < self.epochs - 1:
                self.refresh(ro)
        self.iterations += 1
        skipped = sums.pop("skipped_updates", 0.0)
        out = {k: val / max(count, 1) for k, val in sums.items()}
        out.update(explained_variance=explained, minibatches=float(m), skipped_updates=skipped,
                   updates=float(self.updates))
        return out

    def _skip(self, what: str) -> None:
        self.skipped += 1
        self.nonfinite_in_row += 1
        if self.nonfinite_in_row > self.max_nonfinite_updates:
            raise NonFiniteLossError(
                f"{self.nonfinite_in_row} non-finite {what} values in a row (ppo.max_nonfinite_updates="
                f"{self.max_nonfinite_updates}); the run stops with its last checkpoint kept. Lower "
                f"ppo.learning_rate or check the environment's rewards.")

    def state_dict(self) -> Dict:
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates, "iterations": self.iterations,
                "skipped": self.skipped}

    def load_state_dict(self, d: Dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.updates, self.iterations = int(d["updates"]), int(d["iterations"])
        self.skipped = int(d.get("skipped", 0))  # checkpoints from before the count
