"""The IMPALA learner: re-runs a batch of trajectories from their shipped initial core states with the
current weights, computes V-trace targets and the IMPALA loss, and applies one RMSProp step.

With an RTRL core, ``loss.backward()`` gives the recurrent parameters the exact gradient through
everything since each episode's start (identity 1, given the shipped sensitivities); the stem gets the
truncated gradient of the segment (Irie et al. 2024, Sec. 4), or none when it is frozen.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections import deque
from typing import Callable, Dict, Optional

import torch

from r2ac.agent.distributions import categorical_kl, categorical_log_prob
from r2ac.agent.losses import impala_loss, impala_targets, max_abs_reward, reward_unit
from r2ac.agent.nets import AgentNet
from r2ac.agent.trajectory import observation_key, to_device
from r2ac.cores.rtrl import CarryRecorder


class NonFiniteLossError(RuntimeError):
    pass


#: ``learner.grad_spike_factor``: the median is taken over the last SPIKE_WINDOW applied updates, and only once
#: SPIKE_WARMUP of them exist
SPIKE_WINDOW = 100
SPIKE_WARMUP = 20


def adapt_lr_scale(scale: float, kl: float, target: float, factor: float = 1.5, lowest: float = 0.01) -> float:
    """``learner.kl_target``: the learning-rate factor for the next update from this update's KL(pi_before ||
    pi_after). Above twice the target the factor shrinks by ``factor``, below half the target it grows by it,
    never above 1 (the configured rate and its schedule) nor below ``lowest``; in between it stays."""
    if kl > 2.0 * target:
        scale /= factor
    elif kl < 0.5 * target:
        scale *= factor
    return min(1.0, max(lowest, scale))


def make_optimizer(params, cfg) -> torch.optim.Optimizer:
    """``learner.optimizer``: RMSProp (the paper's, with rmsprop_alpha/eps/momentum) or Adam (adam_eps,
    adam_beta2, adam_amsgrad)."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2), eps=cfg.adam_eps,
                                amsgrad=cfg.adam_amsgrad)
    return torch.optim.RMSprop(params, lr=cfg.learning_rate, alpha=cfg.rmsprop_alpha, eps=cfg.rmsprop_eps,
                               momentum=cfg.rmsprop_momentum)


def decayed_parameters(params) -> list:
    """``learner.weight_decay``'s parameters: the weight matrices (2 dims or more). Biases and per-unit vectors
    (the eLSTM's w_f, w_z, b_f, b_z: its time scales and recurrence) keep their values."""
    return [p for p in params if p.dim() >= 2]


@torch.no_grad()
def decay_(params, lr: float, weight_decay: float) -> None:
    """Decoupled weight decay (AdamW's, applied before the optimizer's step): each parameter times
    ``1 - lr * weight_decay``."""
    if weight_decay > 0:
        torch._foreach_mul_(list(params), 1.0 - lr * weight_decay)


@torch.no_grad()
def gradient_diagnostics(recurrent, corrections: Dict, initial_state: Dict, sensitivity_keys) -> Dict[str, float]:
    """Where the recurrent parameters' gradient comes from: ``carry_grad_norm`` is the norm of the carried
    RTRL correction sum_k dL/ds_k(t0) S_k(t0) (identity 1), ``segment_grad_norm`` that of the rest, the
    gradient from inside the segment; ``sensitivity_rms`` is the RMS of the shipped sensitivities (the
    entries of ``initial_state`` that ``sensitivity_keys`` names; none named: not reported). Empty for a core
    without RTRL."""
    if not corrections:
        return {}
    carry = sum(float(c.pow(2).sum()) for c in corrections.values())
    inside = sum(float((p.grad - corrections.get(p, 0.0)).pow(2).sum()) for p in recurrent if p.grad is not None)
    out = {"carry_grad_norm": math.sqrt(carry), "segment_grad_norm": math.sqrt(inside)}
    sens = [initial_state[k] for k in sensitivity_keys if k in initial_state]
    if sens:
        n = sum(s.numel() for s in sens)
        # one pass, no copy: a float64 copy of the sensitivities cost more than the update itself (measured)
        out["sensitivity_rms"] = math.sqrt(sum(float(torch.linalg.vector_norm(s)) ** 2 for s in sens) / max(n, 1))
    return out


def parameter_norms(net: torch.nn.Module, prefix: str, of: Callable) -> Dict[str, float]:
    """``{prefix/name: |of(p)|}`` for each trainable parameter ``name`` of ``net`` (``of`` gives the tensor
    to measure, e.g. its gradient; None is skipped): the per-update log's gradient and step norms."""
    out = {}
    for name, p in net.named_parameters():
        if p.requires_grad:
            t = of(p)
            if t is not None:
                out[f"{prefix}/{name}"] = float(torch.linalg.vector_norm(t))
    return out


@torch.no_grad()
def polyak_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """``learner.target_tau``: move each of the target network's parameters toward the source's,
    theta_bar <- theta_bar + tau (theta - theta_bar), and copy the buffers (running frame centres)."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)
    for t, s in zip(target.buffers(), source.buffers()):
        t.copy_(s)


def make_target_net(net: torch.nn.Module) -> torch.nn.Module:
    """``learner.target_tau``: the target network, a copy of ``net`` that no gradient reaches."""
    target = copy.deepcopy(net)
    for p in target.parameters():
        p.requires_grad_(False)
    return target


@torch.no_grad()
def target_values(target_net: torch.nn.Module, inputs: Dict, initial_state: Dict,
                  core_input: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The target network's values V(x_0 .. x_M) [M+1, B] on a batch, run from the batch's shipped core state
    (the learner's state at the trajectory's start, as R2D2's stored state serves its target network),
    without sensitivities. ``core_input``: the core's input on the batch, where the caller has it and the
    target network's would be the same (no trainable weight before the core, the same frame statistics): the
    stem and the frame statistics are not computed a second time (the same values, measured faster)."""
    if core_input is not None:
        out, _ = target_net.from_core_input(core_input.detach(), inputs["done"], initial_state,
                                            return_state=False, sensitivities=False)
    else:
        out, _ = target_net(inputs, initial_state, return_state=False, sensitivities=False)
    return out["baseline"]


class Learner:
    def __init__(self, net: AgentNet, cfg, total_steps: int, device="cpu"):
        """``cfg``: the ``learner`` config section (batch_size, unroll_length, discount, costs, RMSProp)."""
        self.net = net
        self.cfg = cfg
        self.total_steps = int(total_steps)
        self.device = torch.device(device)
        self.optimizer = make_optimizer(net.trainable_parameters(), cfg)
        self.decayed = decayed_parameters(net.trainable_parameters())  # learner.weight_decay
        self.recurrent = [p for p in getattr(net.core, "recurrent_parameters", lambda: [])() if p.requires_grad]
        # whether update() measures sensitivity_rms itself: a training session that has it from validating the
        # trajectories (``validate``'s square sums) turns it off, sparing a pass over the sensitivities
        self.sensitivity_rms = True
        self.steps = 0            # agent steps consumed by updates
        self.updates = 0          # applied updates (= weight version)
        self.skipped = 0          # updates skipped for a non-finite loss or gradient
        self.nonfinite_in_row = 0
        # learner.grad_spike_factor: the pre-clip gradient norms of the last applied updates, the updates
        # skipped as spikes (in all and in a row)
        self.recent_norms: deque = deque(maxlen=SPIKE_WINDOW)
        self.spikes = 0
        self.spikes_in_row = 0
        # learner.sensitivities=learner: the RTRL sensitivities at the end of each trained trajectory's M
        # steps, under the weights of that update (set by ``update``; None otherwise)
        self.end_sensitivities = None
        # learner.entropy_cap: the largest |reward| (after reward_clip) of the trained batches so far
        self.max_abs_reward = 0.0
        # learner.kl_target: the factor on the learning rate that keeps each update's KL near the target
        self.lr_scale = 1.0
        # logger.update_log: each update's stats add per-parameter gradient and step norms and the batch's
        # extremes (set by the session)
        self.detail = False
        # learner.target_tau: the target network V-trace bootstraps from (None: the learner's own values)
        self.target_net = make_target_net(net) if cfg.target_tau > 0 else None

    def entropy_weight(self) -> float:
        """The entropy bonus's weight in this update: ``entropy_cost``, capped at ``entropy_cap`` times the
        task's reward unit (the largest |reward| trained on so far, ``reward_unit``); no cap at 0."""
        if self.cfg.entropy_cap > 0:
            return min(self.cfg.entropy_cost, self.cfg.entropy_cap * reward_unit(self.max_abs_reward))
        return self.cfg.entropy_cost

    def logit_penalty_weight(self) -> float:
        """The centred-logit penalty's weight in this update: ``logit_penalty`` times the task's reward unit
        (``reward_unit``), so that it stands in the same ratio to a decision's stake on every task."""
        return self.cfg.logit_penalty * reward_unit(self.max_abs_reward)

    def observe_rewards(self, rewards: torch.Tensor) -> None:
        """Track the largest |reward| (after ``reward_clip``) of the trained steps (``rewards``: the batch's
        rows 1..M, the steps this update trains on)."""
        if rewards.numel():
            self.max_abs_reward = max(self.max_abs_reward, max_abs_reward(rewards, self.cfg.reward_clip))

    def learning_rate(self) -> float:
        if self.cfg.lr_schedule == "constant":
            return self.cfg.learning_rate
        return self.cfg.learning_rate * max(0.0, 1.0 - self.steps / self.total_steps)

    def _vtrace_options(self) -> Dict:
        """The config's V-trace settings, as ``impala_targets`` and ``impala_loss`` take them."""
        c = self.cfg
        return {"discount": c.discount, "reward_clip": c.reward_clip,
                "clip_rho_threshold": c.clip_rho_threshold or None,
                "clip_pg_rho_threshold": c.clip_pg_rho_threshold or None,
                "vtrace_lambda": c.vtrace_lambda, "truncation_bootstrap": c.truncation_bootstrap}

    def targets(self, outputs: Dict, batch: Dict, target_values=None):
        """The V-trace targets of the learner's outputs on a batch (``impala_targets``, detached)."""
        return impala_targets(outputs, batch, target_values=target_values, target_pg=self.cfg.target_pg,
                              **self._vtrace_options())

    def target_values(self, inputs: Dict, batch: Dict, outputs: Optional[Dict] = None) -> Optional[torch.Tensor]:
        """``learner.target_tau``: the target network's values on the batch (``target_values``); None when off.
        ``outputs``: the online network's on the batch; where no trainable weight lies before the core (no
        stem weights, or a frozen stem) the target network runs on their ``core_input``: the polyak update
        copies the buffers (frame statistics) after they last changed, so it is the input the target network
        would compute."""
        if self.target_net is None:
            return None
        shared = outputs is not None and "core_input" in outputs and not any(
            p.requires_grad for p in self.net.stem.parameters())
        return target_values(self.target_net, inputs, batch["initial_state"],
                             outputs["core_input"] if shared else None)

    def loss(self, outputs: Dict, batch: Dict, targets=None, target_values=None):
        """(loss, stats) of the learner's outputs on a batch: the IMPALA loss with V-trace targets; with
        ``targets`` (a first pass's, ``learner.epochs``) those targets and PPO's clip (``learner.clip``); with
        ``target_values`` (``learner.target_tau``) V-trace bootstraps from them."""
        return impala_loss(outputs, batch, baseline_cost=self.cfg.baseline_cost, entropy_cost=self.entropy_weight(),
                           entropy_floor=self.cfg.entropy_floor, logit_penalty=self.logit_penalty_weight(),
                           logit_margin=self.cfg.logit_margin, logit_penalty_where=self.cfg.logit_penalty_where,
                           normalize_pg_advantages=self.cfg.normalize_advantages,
                           targets=targets, clip=self.cfg.clip if targets is not None else 0.0,
                           extremes=self.detail, target_values=target_values, target_pg=self.cfg.target_pg,
                           **self._vtrace_options())

    def update(self, batch: Dict) -> Dict[str, float]:
        """One learner step on a batch of B trajectories (M + 1 frames each)."""
        batch = to_device(batch, self.device)
        T1, B = batch["reward"].shape
        key = observation_key(batch)
        inputs = {key: batch[key], "reward": batch["reward"], "action": batch["action"], "done": batch["done"]}
        self.net.train()
        self.end_sensitivities = None
        lr = self.learning_rate()
        self.observe_rewards(batch["reward"][1:])
        self.optimizer.zero_grad(set_to_none=True)
        with CarryRecorder() as carried:  # the carried RTRL correction, for the diagnostics
            outputs, _ = self.net(inputs, batch["initial_state"], return_state=False)
            boot = self.target_values(inputs, batch, outputs)
            loss, stats = self.loss(outputs, batch, target_values=boot)
            stats["lr"] = lr
            stats["entropy_weight"] = self.entropy_weight()
            if not torch.isfinite(loss):
                return self._skip(stats, "loss")
            loss.backward()
        if self.cfg.sensitivities == "learner":
            self.end_sensitivities = self._end_sensitivities(outputs, batch)
        stats.update(gradient_diagnostics(self.recurrent, carried.corrections, batch["initial_state"],
                                          self.net.core.sensitivity_keys if self.sensitivity_rms else ()))
        params = self.net.trainable_parameters()
        if self.detail:
            stats.update(parameter_norms(self.net, "grad_norm", lambda p: p.grad))
            before = [p.detach().clone() for p in params]
        clip = self.cfg.grad_norm_clip if self.cfg.grad_norm_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(params, clip)
        stats["grad_norm"] = float(grad_norm)
        if not math.isfinite(stats["grad_norm"]):
            self.optimizer.zero_grad(set_to_none=True)
            return self._skip(stats, "gradient")
        if self._is_spike(stats["grad_norm"]):
            self.optimizer.zero_grad(set_to_none=True)
            stats.update(skipped_updates=self.skipped, spike_skipped_updates=self.spikes)
            return stats
        for group in self.optimizer.param_groups:
            group["lr"] = lr * self.lr_scale
        decay_(self.decayed, lr * self.lr_scale, self.cfg.weight_decay)
        self.optimizer.step()
        self.net.core.project_()
        if self.detail:
            moved = {id(p): b for p, b in zip(params, before)}
            stats.update(parameter_norms(self.net, "step_norm", lambda p: p.detach() - moved[id(p)]))
        if self.cfg.epochs > 1:
            stats.update(self._more_passes(inputs, batch, outputs, lr, boot))
        if self.cfg.kl_target > 0 or self.cfg.log_update_kl:
            stats.update(self._update_kl(inputs, batch, outputs["policy_logits"]))
        if key == "obs":  # model.running_centres: the batch's new frames (frame 0 ended the previous batch)
            self.net.observe_frames(batch["obs"][1:], outputs["frame_stats"][1:] if "frame_stats" in outputs else None)
        if self.target_net is not None:  # learner.target_warmup_steps: it follows the weights until then
            # after observe_frames: the buffers it copies are those the next batch's online pass uses
            tau = 1.0 if self.steps < self.cfg.target_warmup_steps else self.cfg.target_tau
            polyak_update(self.target_net, self.net, tau)
            stats["target_mean_value"] = float(boot[:-1].mean())
        self.nonfinite_in_row = 0
        self.updates += 1
        self.steps += (T1 - 1) * B
        lag = (self.updates - 1 - batch["version"]).float()
        stats.update(policy_lag_mean=lag.mean().item(), policy_lag_max=lag.max().item(), skipped_updates=self.skipped)
        if self.cfg.grad_spike_factor > 0:
            stats["spike_skipped_updates"] = self.spikes
        return stats

    def _is_spike(self, grad_norm: float) -> bool:
        """``learner.grad_spike_factor``: whether this update's pre-clip gradient norm is a spike, more than
        the factor times the median of the last ``SPIKE_WINDOW`` applied updates (never before
        ``SPIKE_WARMUP`` of them). A spike is counted and skipped; after ``SPIKE_WINDOW`` spikes in a row the
        norms have moved for good, so the window starts afresh and the next updates are applied."""
        factor = self.cfg.grad_spike_factor
        if factor <= 0:
            return False
        if len(self.recent_norms) >= SPIKE_WARMUP and grad_norm > factor * statistics.median(self.recent_norms):
            self.spikes += 1
            self.spikes_in_row += 1
            if self.spikes_in_row >= SPIKE_WINDOW:
                self.recent_norms.clear()
                self.spikes_in_row = 0
            return True
        self.spikes_in_row = 0
        self.recent_norms.append(grad_norm)
        return False

    def _more_passes(self, inputs: Dict, batch: Dict, first: Dict, lr: float, boot=None) -> Dict[str, float]:
        """``learner.epochs`` > 1: passes 2..E over the same batch, each a forward pass from the batch's initial
        state and sensitivities (stale after the first step, as PPO's stored traces are) and one optimizer
        step on PPO's clipped surrogate against the first pass's policy, with the first pass's V-trace targets
        and advantages (APPO-style). A pass whose loss or gradient is not finite ends the passes unapplied.
        Returns the passes applied (the first included) and the clipped fraction of the last pass's steps."""
        targets = self.targets({k: v.detach() for k, v in first.items()}, batch, boot)
        params = self.net.trainable_parameters()
        max_norm = self.cfg.grad_norm_clip if self.cfg.grad_norm_clip > 0 else math.inf
        passes, clipped = 1, 0.0
        for _ in range(self.cfg.epochs - 1):
            self.optimizer.zero_grad(set_to_none=True)
            outputs, _ = self.net(inputs, batch["initial_state"], return_state=False)
            loss, _ = self.loss(outputs, batch, targets)
            if not torch.isfinite(loss):
                break
            loss.backward()
            if not math.isfinite(float(torch.nn.utils.clip_grad_norm_(params, max_norm))):
                break
            for group in self.optimizer.param_groups:
                group["lr"] = lr * self.lr_scale
            decay_(self.decayed, lr * self.lr_scale, self.cfg.weight_decay)
            self.optimizer.step()
            self.net.core.project_()
            passes += 1
            with torch.no_grad():
                log_pi = categorical_log_prob(outputs["policy_logits"][:-1], batch["action"][1:])
                ratio = torch.exp(log_pi - targets.target_action_log_probs)
                clipped = ((ratio - 1.0).abs() > self.cfg.clip).float().mean().item()
        self.optimizer.zero_grad(set_to_none=True)
        return {"passes": float(passes), "clip_fraction": clipped}

    @torch.no_grad()
    def _update_kl(self, inputs: Dict, batch: Dict, before: torch.Tensor) -> Dict[str, float]:
        """How far this update moved the policy: the mean over the batch's M x B steps of
        KL(pi_before || pi_after), the policy on the same inputs from the same initial states before and after
        the optimizer step (one more forward pass, without sensitivities). With ``learner.kl_target`` > 0 it
        sets the next update's learning-rate factor (``adapt_lr_scale``)."""
        after, _ = self.net(inputs, batch["initial_state"], return_state=False)
        kl = categorical_kl(before[:-1].detach(), after["policy_logits"][:-1]).mean().item()
        if self.cfg.kl_target > 0 and math.isfinite(kl):
            self.lr_scale = adapt_lr_scale(self.lr_scale, kl, self.cfg.kl_target)
        return {"update_kl": kl, "lr_scale": self.lr_scale}

    @torch.no_grad()
    def _end_sensitivities(self, outputs: Dict, batch: Dict) -> Optional[Dict]:
        """The sensitivities after the trajectory's first M frames (where the actor's next trajectory starts;
        frame M is that trajectory's frame 0), moved across the segment in closed form under the current
        (pre-update) weights, from the batch's initial state."""
        keys = self.net.core.sensitivity_keys
        if not keys:
            return None
        x = outputs["core_input"][:-1].detach()
        _, end = self.net.core(x, batch["initial_state"], batch["done"][:-1])
        return {k: end[k] for k in keys}

    def _skip(self, stats, what: str) -> Dict[str, float]:
        self.skipped += 1
        self.nonfinite_in_row += 1
        stats["skipped_updates"] = self.skipped
        if self.nonfinite_in_row > self.cfg.max_nonfinite_updates:
            raise NonFiniteLossError(
                f"{self.nonfinite_in_row} non-finite {what} values in a row (learner.max_nonfinite_updates="
                f"{self.cfg.max_nonfinite_updates}); the run stops with its last checkpoint kept. Lower "
                f"learner.learning_rate or check the environment's rewards.")
        return stats

    def state_dict(self) -> Dict:
        d = {"optimizer": self.optimizer.state_dict(), "steps": self.steps, "updates": self.updates,
             "skipped": self.skipped, "max_abs_reward": self.max_abs_reward, "lr_scale": self.lr_scale}
        if self.target_net is not None:
            d["target_net"] = self.target_net.state_dict()
        return d

    def load_state_dict(self, d: Dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.steps, self.updates, self.skipped = int(d["steps"]), int(d["updates"]), int(d["skipped"])
        # checkpoints written before learner.entropy_cap existed: the unit is measured again from here
        self.max_abs_reward = float(d.get("max_abs_reward", 0.0))
        self.lr_scale = float(d.get("lr_scale", 1.0))  # checkpoints from before learner.kl_target
        if self.target_net is not None:
            # a checkpoint from a run without learner.target_tau: the target starts as the loaded weights
            if "target_net" in d:
                self.target_net.load_state_dict(d["target_net"])
            else:
                self.target_net.load_state_dict(self.net.state_dict())
