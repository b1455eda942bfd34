"""The typed schema of r2ac runs: a tree of dataclasses (:class:`Config` at the root, one section per
part of a run), each field with its default, help text and bounds in its metadata; and the checks that
build a validated :class:`Config` from a plain dict (:func:`config_from_dict`). Files, inheritance and
``key=value`` overrides are ``r2ac.config.loading``.

Every value is checked against the schema.  Problems raise :class:`ConfigError`, whose message
names the full dotted key, what was found and what is allowed; all problems of one load are
reported together.  See ``docs/configuration.md`` for every key.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ConfigError",
    "Config",
    "EnvConfig",
    "ModelConfig",
    "StemConfig",
    "LearnerConfig",
    "PPOConfig",
    "RuntimeConfig",
    "LoggerConfig",
    "CheckpointConfig",
    "EvalConfig",
    "StopConfig",
    "PipelineConfig",
    "config_from_dict",
    "config_to_dict",
    "config_keys",
]


class ConfigError(ValueError):
    """A configuration problem.  ``errors`` holds one line per problem."""

    def __init__(self, errors: str | list[str], source: str | None = None):
        if isinstance(errors, str):
            errors = [errors]
        self.errors = list(errors)
        self.source = source
        where = f" in {source}" if source else ""
        if len(self.errors) == 1:
            msg = f"invalid config{where}: {self.errors[0]}"
        else:
            msg = f"invalid config{where} ({len(self.errors)} problems):\n" + "\n".join(
                f"  - {e}" for e in self.errors
            )
        super().__init__(msg)


# --------------------------------------------------------------------------------------------
# Field helpers.  Constraints live in the field metadata and are checked generically:
#   gt / ge / lt / le: numeric bounds; item_gt: bound on every list element;
#   nonempty: str/list must not be empty; allow_inf: float may be +inf.
# --------------------------------------------------------------------------------------------


def _f(default: Any, help: str = "", **checks: Any) -> Any:
    meta = {"help": help, **checks}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: copy.deepcopy(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class EnvConfig:
    id: str = _f("tmaze", "environment id (see r2ac.envs)", nonempty=True)
    num_envs: int = _f(16, "environments stepped in a batch by each actor", gt=0)
    options: dict = _f({}, "free-form keyword arguments for the environment constructor")
    desync: bool = _f(
        True, "training actors start each env's first episode at a random step of its course (VecEnv.desync: "
        "the built-in tasks and gym: envs; other kinds keep their reset), so the envs of a batch do not all "
        "reach the rewarded step in the same update (docs/results.md, 'Envs out of step')")
    frame_stack: int = _f(
        1, "each observation is the env's last frame_stack observations stacked on the first axis: frames "
        "(C, H, W) -> (frame_stack*C, H, W), oldest first; vectors (D,) -> (frame_stack*D,); zeros before an "
        "episode's first (r2ac.envs.stack). 1: off. For tasks whose answer is a motion (docs/results.md, 'Which "
        "way a ball moved'); Atari stacks its own frames (env.options.frame_stack)", gt=0)


@dataclass
class ModelConfig:
    stem: Literal["impala", "shallow", "mlp", "none"] = _f("impala", "observation encoder")
    stem_channels: list[int] = _f([16, 32, 32], "conv channels per stem block", item_gt=0)
    stem_fc: int = _f(256, "width of the stem's output layer", gt=0)
    core: str = _f("elstm", "recurrent core name (see r2ac.cores)", nonempty=True)
    hidden_size: int = _f(512, "recurrent state size", gt=0)
    learning: Literal["rtrl", "tbptt"] = _f("rtrl", "how the core's gradients are computed")
    freeze_core: bool = _f(
        False, "keep the core's weights as initialised, out of the optimizer (with model.learning=tbptt): a fixed "
        "random memory of which only the read-out (the heads) learns, the 'reservoir' method of r2ac bench memory")
    core_options: dict = _f({}, "free-form keyword arguments for the core constructor")
    reward_input: bool = _f(True, "feed the previous reward to the core")
    carry_inputs_across_episodes: bool = _f(
        False, "feed the previous episode's last reward and action with the first frame of the next episode "
        "(IMPALA's input as is); false: zero them there, where the core state is reset too")
    episode_start_input: bool = _f(
        False, "one more core input, 1 on the first frame of an episode and 0 elsewhere")
    episode_start_value: float | Literal["auto"] = _f(
        "auto", "the episode-start input's value on an episode's first frame (episode_start_input); 'auto': "
        "10 where raw image frames enter the core with stem 'none' (scaled by input_scale 'auto''s 0.1; "
        "docs/results.md says why), 1 otherwise", gt=0.0)
    centre_frames: bool | Literal["auto"] = _f(
        "auto", "raw image frames (stem 'none'): each channel minus its median (frame_centre) over the frame "
        "(then times input_scale), and the channel means as their own inputs (unscaled, in [0, 1]); 'auto': "
        "on for raw image frames, off otherwise (docs/results.md says why)")
    frame_centre: Literal["mean", "median", "median_mean", "median_feed_mean"] = _f(
        "median_feed_mean", "what centre_frames subtracts from each channel of a frame and feeds as its C "
        "inputs: 'median_feed_mean' (the default): minus the median (the background level: a small object on "
        "a black floor leaves the floor at 0), with the channel means as the C inputs; 'mean': minus the mean, "
        "the means as inputs; 'median': minus the median, the medians as inputs; 'median_mean': minus the "
        "median, both the medians and the means as 2C inputs (docs/results.md, 'Mean, median or both' and "
        "'Minus the median, the means as inputs')")
    frame_spread: bool = _f(
        False, "with centre_frames, C more inputs: each channel's mean absolute distance from its centre over "
        "the frame (its contrast: 0 on a uniform frame, about 0.25 on uniform noise), unscaled")
    frame_extremes: bool | Literal["auto"] = _f(
        "auto", "2C more inputs after the channel centres (and spreads): each channel's largest, then smallest, "
        "value of the centred frame, unscaled. A small object moves them by its colour wherever it is, where it "
        "moves a channel's mean only by its share of the frame. 'auto' (the default since 2026-11-30): on "
        "wherever frames are centred (centre_frames); true without centred frames is an error (docs/results.md, "
        "'A small square on a large frame')")
    frame_centroids: bool | Literal["auto"] = _f(
        "auto", "2C more inputs after the extremes: each channel's centroid of what lies above its centre in the "
        "centred frame (its x, then its y coordinate, in [-1, 1]; 0 where nothing does), unscaled: a small "
        "object's place as two numbers wherever it is. 'auto' (the default since 2026-11-30): on wherever frames "
        "are centred (centre_frames); true without centred frames is an error (docs/results.md, 'Where an object "
        "is, as two numbers')")
    centre_basis: Literal["channels", "contrasts"] = _f(
        "contrasts", "the basis in which the channel centres (and spreads) that centre_frames feeds enter the "
        "core: 'channels', one input per channel; 'contrasts', an orthonormal re-coding of each group of C: "
        "their sum over the channels / sqrt(C) (a frame's grey level), then C - 1 contrasts between channels "
        "(Helmert's: for RGB (R - G) / sqrt(2) and (R + G - 2B) / sqrt(6)). The same information, on axes "
        "where a grey frame (noise, blank) moves one input and a colour the others; the default since 2026-11-29 "
        "(docs/results.md, 'Colour on axes of its own')")
    running_centres: bool | Literal["auto"] = _f(
        "auto", "the channel centres (and spreads) that centre_frames feeds enter minus their running mean over "
        "every frame the learner has trained on (kept with the weights); 'auto': on with centred frames "
        "(docs/results.md says why)")
    centre_observations: bool = _f(
        False, "flat observations that enter the core as they are (stem 'none', not image frames) enter minus "
        "their running mean over every observation the learner has trained on (kept with the weights), then "
        "times input_scale: an entry that never changes (a wall always in view) feeds nothing")
    prev_action_input: bool | Literal["auto"] = _f(
        "auto", "feed the previous action (one-hot) to the core; 'auto': where the task declares that its "
        "observation needs it (POPGym's obs_requires_prev_action: the bandit, Concentration, Battleship, "
        "MineSweeper; the same class attribute on a gym:/gymc: env of your own), off elsewhere")
    input_scale: float | Literal["auto", "auto_pixels"] = _f(
        "auto", "multiplies the stem's features before they enter the core; 'auto': 0.1 for image frames "
        "with stem 'none' (raw pixels in [0, 1]) and for flat observations of 256 entries or more with stem "
        "'none' (MiniGrid's one-hot view; docs/results.md says why), 1 otherwise; 'auto_pixels': 0.1 for the "
        "image frames only (the rule before 2026-11-27, which runs saved before then read 'auto' as)", gt=0.0)
    frame_pool: int | Literal["auto"] = _f(
        "auto", "raw image frames (stem 'none') enter the core averaged over blocks of this many x this many "
        "pixels per channel (1: as they are); 'auto': the smallest block that leaves at most 576 pixels (24 x 24) "
        "per channel, so 48 x 48 frames by 2, 64 x 64 by 3, 84 x 84 by 4; 1 for other observations and stems "
        "(docs/results.md, 'Frames larger than the suite's')", ge=1)
    head_hidden: int = _f(
        0, "width of one tanh layer that the policy and baseline heads share; 0 (the default): linear heads on "
        "the core's output, as the papers", ge=0)
    head_input: bool = _f(
        False, "the heads see the core's input of the same step (frame features, reward, action) beside the "
        "core's output: an answer that joins a memory with the current view needs no gating in the core")
    head_norm: bool = _f(
        False, "layer-normalise the heads' input (no parameters): every step's features have the same norm, so "
        "through the baseline head's weights a bootstrapped value target cannot outgrow the value it trains; it "
        "did not stop key to door's falls at 100x M (docs/results.md)")


@dataclass
class StemConfig:
    path: str = _f("", "checkpoint to load pretrained stem weights from ('' = train from scratch)")
    freeze: bool = _f(False, "do not update the stem's weights")


@dataclass
class LearnerConfig:
    batch_size: int = _f(32, "trajectories per learner update", gt=0)
    unroll_length: int = _f(100, "steps per trajectory (M)", gt=0)
    discount: float = _f(0.99, "discount factor gamma", ge=0.0, le=1.0)
    baseline_cost: float = _f(0.5, "weight of the value loss", ge=0.0)
    entropy_cost: float = _f(0.05, "weight of the entropy bonus (the paper: 0.01; see entropy_floor)", ge=0.0)
    entropy_floor: float = _f(
        0.9, "the bonus is on min(H, entropy_floor * ln A) per step (A actions; ln A is the uniform policy's "
        "entropy): it keeps a policy from turning certain but does not pull a near-uniform one toward uniform, "
        "where a memory's first weak signal forms (docs/results.md, 'An entropy floor'); 0 = the plain bonus on H",
        ge=0.0, le=1.0)
    entropy_cap: float = _f(
        0.25, "the bonus's weight is min(entropy_cost, entropy_cap * u), u the task's reward unit: the largest "
        "|reward| (after reward_clip) trained on so far, 1 before any nonzero reward. Where an answer is worth u, a "
        "step's bonus then never holds the policy below p(right)/p(wrong) = e^(1/entropy_cap) (e^4 = 55): a task "
        "that pays 1/51 per step gets 0.25/51 (docs/results.md, 'Held-out tasks'); 0 = no cap", ge=0.0)
    logit_penalty: float = _f(
        1e-3, "weight of 0.5 * sum_a (z_a - mean z)^2 per step on the policy's logits z, times the task's reward unit "
        "u (as for entropy_cap): a pull on a certain policy that does not vanish with certainty (the policy "
        "gradient's and the entropy's do), so an answer given wrongly with certainty can be unlearned; at 1e-3 "
        "it holds a right answer worth u at a logit gap of about 6 over the wrong ones (docs/results.md, 'The "
        "copy task's middle bit'); 0 = off", ge=0.0)
    logit_margin: float = _f(
        0.0, "with logit_penalty, pull only on the part of each centred logit beyond this many nats: 0.5 * sum_a "
        "max(|z_a - mean z| - logit_margin, 0)^2, none on a policy whose logits lie within it (docs/results.md, "
        "'A margin on the pull': at 2 it left the copy task's majority answers at gaps of 6-9, so it is off); 0 = pull "
        "on every logit", ge=0.0)
    logit_penalty_where: Literal["every_step", "below_floor"] = _f(
        "every_step", "where logit_penalty pulls: 'every_step', or 'below_floor', only at the steps whose policy "
        "entropy is below the entropy floor (entropy_floor * ln A, so it needs entropy_floor > 0), where the "
        "policy is near certain; summed over every step, the pull also holds the heads off reading a memory at "
        "the hundreds of steps it is held for (docs/results.md, 'The pull below the floor'). logit_pull_frac "
        "logs the fraction of steps pulled at")
    learning_rate: float = _f(6e-3, "initial learning rate (the paper: 6e-4 with RMSprop)", gt=0.0)
    lr_schedule: Literal["linear", "constant"] = _f("linear", "'linear' decays to 0 at total_steps")
    rmsprop_alpha: float = _f(0.99, "RMSprop smoothing constant", ge=0.0, lt=1.0)
    rmsprop_eps: float = _f(0.01, "RMSprop epsilon", gt=0.0)
    rmsprop_momentum: float = _f(0.0, "RMSprop momentum", ge=0.0, lt=1.0)
    optimizer: Literal["rmsprop", "adam"] = _f("adam", "'adam' (adam_eps) or 'rmsprop' (the paper's; rmsprop_* keys)")
    adam_eps: float = _f(1e-8, "Adam epsilon (optimizer=adam)", gt=0.0)
    adam_beta2: float = _f(0.999, "Adam's second-moment decay (optimizer=adam): its running mean of squared "
                                  "gradients spans about 1 / (1 - adam_beta2) updates", gt=0.0, lt=1.0)
    adam_amsgrad: bool = _f(True, "AMSGrad (Reddi et al. 2018): Adam divides by the largest second-moment estimate "
                                  "so far, so once gradients shrink (a solved task) its steps shrink with them, where "
                                  "plain Adam's (false) return to about the learning rate and a solved policy can fall "
                                  "back (optimizer=adam; docs/results.md, 'AMSGrad by default')")
    clip_rho_threshold: float = _f(1.0, "V-trace rho-bar for the value targets (0 = no clipping)", ge=0.0)
    normalize_advantages: bool = _f(False, "scale policy-gradient advantages to zero mean, unit std per batch")
    clip_pg_rho_threshold: float = _f(1.0, "V-trace rho-bar of the policy-gradient advantage (0 = no clipping)", ge=0.0)
    epochs: int = _f(1, "passes over each batch: > 1 adds passes on PPO's clipped surrogate against the first "
                        "pass's policy, with its V-trace targets (APPO-style; IMPALA only)", gt=0)
    clip: float = _f(0.2, "PPO's ratio clip for the passes after the first (learner.epochs > 1)", gt=0.0)
    kl_target: float = _f(0.0, "keep each update's KL(pi_before || pi_after) on its batch near this: the learning rate "
                               "shrinks by 1.5 after an update above twice it and grows back by 1.5 (up to the "
                               "configured rate) below half of it; costs one forward pass per update (0 = off)",
                          ge=0.0)
    log_update_kl: bool = _f(False, "log each update's KL(pi_before || pi_after) on its batch (update_kl; one more "
                                    "forward pass per update) without acting on it")
    vtrace_lambda: float = _f(1.0, "V-trace lambda: c_s = lambda * min(1, rho_s) (Espeholt et al. 2018 Sec. 4.1; "
                                   "1 = IMPALA's V-trace, < 1 shortens the targets' reach like GAE's lambda)",
                              ge=0.0, le=1.0)
    target_tau: float = _f(
        0.05, "value targets from a slowly moving copy of the network: V-trace's V(x_s) and bootstrap V(x_M) come from "
        "a target network, run over each batch from the shipped core state (R2D2's stored state) and moved toward "
        "the learner's weights by target_tau after each update (Polyak averaging; 1 follows the weights exactly: the "
        "targets of 0, for one more forward pass); the policy gradient's baseline stays the learner's own value. "
        "A target that lags cannot run away with the values it trains: at 0.05 no key-to-door run at 100x M fell "
        "after solving, where 2 of 3 did with the learner's own values (docs/results.md, 'A target network for the "
        "bootstraps'); 0 = off, the learner's own values (IMPALA)", ge=0.0, le=1.0)
    target_warmup_steps: int = _f(
        0, "with target_tau > 0: for the first this many agent steps the target network follows the learner's "
        "weights exactly (the learner's own values, as target_tau 1 or 0), then moves by target_tau. A target's lag "
        "costs most while the values first take shape: on the vector cue at 100x M a target from the start took "
        "1.42x the steps of none, with target_warmup_steps=400000 1.02x, and key to door's falling seeds still held, "
        "but key to door with vectors took 1.35x the steps of a target from the start (docs/results.md, 'The vector "
        "cue's cost under a target network'); 0 = a target from the first update", ge=0)
    target_pg: bool = _f(
        True, "with target_tau > 0: the policy gradient's advantages bootstrap from the target network too (true), "
        "or only the value's targets do and the advantages are IMPALA's own, from the learner's values (false: "
        "the critic's target network of DDPG and SAC, whose actor follows the current critic)")
    weight_decay: float = _f(
        0.0, "decoupled weight decay (AdamW, Loshchilov & Hutter 2019): before each optimizer step every weight "
        "matrix of the network (the core's input weights F, Z, O and W_o, the stem's, the heads') is multiplied by "
        "1 - lr * weight_decay; biases and the eLSTM's per-unit w_f, w_z, b_f, b_z (its time scales) are not. A "
        "weight whose gradient is only noise (the pixels of noise frames) otherwise random-walks under Adam's "
        "normalised steps; 0 = off", ge=0.0)
    grad_norm_clip: float = _f(40.0, "global gradient-norm clip (0 = off)", ge=0.0)
    truncation_bootstrap: bool = _f(
        False, "where a time limit cuts an episode and the env reports its final observation (POPGym, MuJoCo, "
        "gymc: kinds), add discount * V(final observation) to the last reward instead of treating the cut as "
        "the episode's end (docs/results.md, 'Time limits'; the PPO agent always does)")
    sensitivities: Literal["actor", "learner"] = _f(
        "actor", "where a trajectory's starting RTRL sensitivities come from: 'actor' (shipped, computed under the "
        "actor's weights) or 'learner' (carried over from the learner's own pass over that env's previous "
        "trajectory; the shipped ones where that pass has not happened yet)")
    reward_clip: float = _f(1.0, "clip rewards to [-c, c] (0 = off)", ge=0.0)
    max_nonfinite_updates: int = _f(10, "skipped non-finite updates in a row before aborting", ge=0)
    grad_spike_factor: float = _f(
        0.0, "skip an update whose gradient norm (before clipping) exceeds this many times the median norm of "
        "the last 100 applied updates (0 = off; > 1 otherwise). The exact RTRL gradient explodes when the core's "
        "dynamics turn expanding along an episode (docs/results.md, 'Exploding sensitivities')", ge=0.0)


@dataclass
class PPOConfig:
    rollout_length: int = _f(2048, "steps collected per env before each update", gt=0)
    epochs: int = _f(10, "passes over each rollout", gt=0)
    minibatches: int = _f(32, "minibatches per epoch", gt=0)
    gae_lambda: float = _f(0.95, "GAE lambda", ge=0.0, le=1.0)
    discount: float = _f(0.99, "discount factor gamma", ge=0.0, le=1.0)
    clip: float = _f(0.2, "policy ratio clip epsilon", gt=0.0)
    value_clip: float = _f(0.5, "value clip range (0 = off)", ge=0.0)
    entropy_cost: float = _f(0.0, "weight of the entropy bonus", ge=0.0)
    learning_rate: float = _f(3e-4, "Adam learning rate", gt=0.0)
    grad_norm_clip: float = _f(0.5, "global gradient-norm clip (0 = off)", ge=0.0)
    refresh_traces: bool = _f(False, "recompute RTRL traces with the current weights every epoch")
    adam_eps: float = _f(1e-5, "Adam epsilon", gt=0.0)
    sequence_length: int = _f(0, "minibatch chunk length (0 = auto: 1 with RTRL, ppo.truncation_length with TBPTT)",
                              ge=0)
    truncation_length: int = _f(100, "chunk length with model.learning=tbptt when sequence_length is 0 (the BPTT "
                                     "truncation)", gt=0)
    trace_memory_budget_mb: float = _f(2048.0, "refuse to start if one rollout's stored traces exceed this",
                                       gt=0.0)
    normalize_observations: Literal["auto", "on", "off"] = _f("auto", "running obs normalisation ('auto': "
                                                                       "on for continuous actions)")
    normalize_rewards: Literal["auto", "on", "off"] = _f("auto", "reward scaling by the return's running std "
                                                                  "('auto': on for continuous actions)")
    normalize_advantages: bool = _f(True, "normalise advantages per minibatch")
    value_cost: float = _f(0.5, "weight of the value loss", ge=0.0)
    log_std_init: float = _f(0.0, "initial log-std of the Gaussian policy (continuous actions)")
    max_nonfinite_updates: int = _f(10, "skipped non-finite minibatch updates in a row before aborting", ge=0)
    encoder: list[int] = _f([64], "tanh layers between the network input and the core (the paper: one of 64 "
                                  "units; [] = none)", item_gt=0)


@dataclass
class RuntimeConfig:
    kind: Literal["local", "ray"] = _f("local", "run actors in-process or on a Ray cluster")
    num_actors: int = _f(1, "actor workers", gt=0)
    address: str = _f("", "Ray cluster address ('' = start a local Ray instance)")
    max_trajectories_in_flight: int = _f(2, "unconsumed trajectories per actor", gt=0)
    dashboard_host: str = _f("127.0.0.1", "Ray dashboard bind address", nonempty=True)
    learner_gpus: float = _f(0.0, "GPUs reserved for the learner", ge=0.0)
    torch_threads: int = _f(1, "torch intra-op threads per process (0 = torch's default: all cores)", ge=0)


@dataclass
class LoggerConfig:
    tensorboard: bool = _f(True, "write TensorBoard event files to <run_dir>/tensorboard")
    wandb: bool = _f(False, "log to Weights & Biases")
    wandb_project: str = _f("r2ac", "W&B project", nonempty=True)
    wandb_group: str = _f("", "W&B group ('' = none)")
    wandb_tags: list[str] = _f([], "W&B tags")
    wandb_mode: Literal["auto", "online", "offline"] = _f("auto", "'auto': online iff an API key is set")
    log_interval_s: float = _f(5.0, "seconds between metric rows", gt=0.0)
    progress_bar: bool = _f(True, "show a progress bar when stdout is a terminal")
    update_log: bool = _f(False, "also write every learner update's statistics to <run_dir>/updates.csv, with "
                                 "per-parameter gradient and step norms and the batch's extremes (values, value "
                                 "errors, advantages, importance weights, logits): for finding what one update did; "
                                 "a row per update (algo impala and a2c)")


@dataclass
class CheckpointConfig:
    interval_s: float = _f(300.0, "seconds between checkpoints (.inf = only at the end)", gt=0.0,
                           allow_inf=True)
    keep: int = _f(2, "newest checkpoints kept on disk", gt=0)


@dataclass
class EvalConfig:
    sets: int = _f(3, "independent evaluation sets of `r2ac eval` and of eval.at_end (0 = none at the end)", ge=0)
    episodes: int = _f(100, "episodes per evaluation set", gt=0)
    interval_steps: int = _f(0, "evaluate every this many agent steps during training (0 = never)", ge=0)
    interval_episodes: int = _f(10, "episodes of each periodic evaluation (eval.interval_steps)", gt=0)
    at_end: bool = _f(False, "evaluate eval.sets x eval.episodes episodes when training ends")
    greedy: bool = _f(False, "evaluate the greedy (argmax) policy instead of sampling actions")
    num_envs: int = _f(0, "envs stepped together in evaluations (0 = env.num_envs)", ge=0)
    video: bool = _f(False, "record one evaluation episode to <run_dir>/videos (image observations)")


@dataclass
class StopConfig:
    success: float = _f(0.0, "end training once the mean success over the last stop.window_episodes episodes reaches "
                             "this (info['success'] where the env reports it, else the episode return; 0 = never)",
                        ge=0.0)
    window_episodes: int = _f(400, "episodes that stop.success is the mean of (the window must be full)", gt=0)
    hold_steps: int = _f(0, "agent steps to train on after stop.success is first reached, then end (0 = at once)",
                         ge=0)


@dataclass
class PipelineConfig:
    pretrain_steps: int = _f(0, "`r2ac pipeline`: TBPTT pretraining steps of stage 1 (0 = no pipeline)", ge=0)
    pretrain_unroll_length: int = _f(100, "`r2ac pipeline`: M of the TBPTT pretraining stage", gt=0)
    pretrain_overrides: list[str] = _f([], "`r2ac pipeline`: extra key=value overrides for stage 1 only")


@dataclass
class Config:
    name: str = _f("run", "run name (also the default run directory)", nonempty=True)
    seed: int = _f(0, "random seed", ge=0)
    run_dir: str = _f("", "output directory ('' = runs/<name>)")
    algo: Literal["impala", "a2c", "ppo"] = _f("impala", "training algorithm ('a2c': the synchronous reference)")
    device: Literal["auto", "cpu", "cuda"] = _f("auto", "learner device ('auto' = cuda if available)")
    total_steps: int = _f(1_000_000, "agent steps to train for, summed over envs", gt=0)
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    stem: StemConfig = field(default_factory=StemConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)


# Keys that were renamed or are commonly guessed: a better hint than difflib can give.
_KEY_HINTS = {
    "ppo.num_steps": "ppo.rollout_length",
    "ppo.n_steps": "ppo.rollout_length",
    "ppo.lr": "ppo.learning_rate",
    "learner.lr": "learner.learning_rate",
    "learner.unroll": "learner.unroll_length",
    "ppo.gamma": "ppo.discount",
    "learner.gamma": "learner.discount",
    "env.name": "env.id",
    "model.core_kwargs": "model.core_options",
    "env.kwargs": "env.options",
}


# --------------------------------------------------------------------------------------------
# Schema introspection
# --------------------------------------------------------------------------------------------

_HINTS_CACHE: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS_CACHE:
        _HINTS_CACHE[cls] = typing.get_type_hints(cls)
    return _HINTS_CACHE[cls]


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _type_name(tp: Any) -> str:
    if _is_union(tp):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp) or (Any,)
        plural = {int: "integers", float: "numbers", str: "strings", bool: "bools"}
        return f"a list of {plural.get(item, 'values')}"
    if _is_dict(tp):
        return "a mapping"
    if _is_section(tp):
        return "a mapping (section)"
    return {bool: "a bool (true/false)", int: "an integer", float: "a number", str: "a string"}.get(
        tp, str(tp)
    )


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def config_keys(cls: type = None, prefix: str = "") -> list[str]:
    """All dotted keys of the schema (leaf keys; dict-typed fields count as leaves)."""
    cls = cls or Config
    keys = []
    for name, tp in _hints(cls).items():
        if _is_section(tp):
            keys.extend(config_keys(tp, _join(prefix, name)))
        else:
            keys.append(_join(prefix, name))
    return keys


def _unknown_key_message(cls: type, prefix: str, key: Any) -> str:
    full = _join(prefix, key)
    allowed = list(_fields(cls))
    hint = _KEY_HINTS.get(full)
    if hint is None:
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        if close:
            hint = _join(prefix, close[0])
    where = f"section '{prefix}'" if prefix else "the top level"
    msg = f"unknown key '{full}'."
    if hint:
        msg += f" Did you mean '{hint}'?"
    return msg + f" Allowed keys at {where}: {', '.join(allowed)}"


# --------------------------------------------------------------------------------------------
# Value checking
# --------------------------------------------------------------------------------------------


def _coerce(value: Any, tp: Any, key: str, errors: list[str]) -> Any:
    """Check ``value`` against annotation ``tp``; return the (possibly converted) value.

    On a problem an error line is appended and ``dataclasses.MISSING`` returned.
    """
    bad = dataclasses.MISSING
    origin = typing.get_origin(tp)

    if _is_union(tp):
        for member in typing.get_args(tp):
            v = _coerce(value, member, key, [])
            if v is not bad:
                return v
        errors.append(f"{key}: expected {_type_name(tp)}, got {_show(value)}")
        return bad

    if origin is Literal:
        allowed = typing.get_args(tp)
        for a in allowed:
            if type(value) is type(a) and value == a:
                return value
        msg = f"{key}: must be one of {', '.join(repr(a) for a in allowed)}; got {_show(value)}"
        if isinstance(value, str):
            close = difflib.get_close_matches(value, [str(a) for a in allowed], n=1, cutoff=0.6)
            if close:
                msg += f". Did you mean {close[0]!r}?"
        errors.append(msg)
        return bad

    if tp is bool:
        if isinstance(value, bool):
            return value
        errors.append(f"{key}: expected a bool (true/false), got {_show(value)}")
        return bad

    if tp is int:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            return value
        elif isinstance(value, (float, str)):
            # 1e6 (a string to PyYAML) or 1.0e6 are accepted when they are whole numbers.
            try:
                f = float(value)
            except ValueError:
                f = math.nan
            if math.isfinite(f) and f == int(f):
                return int(f)
        errors.append(f"{key}: expected an integer, got {_show(value)}")
        return bad

    if tp is float:
        f = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            f = float(value)
        elif isinstance(value, str):
            # PyYAML reads 6e-4 (no dot) as a string; accept numeric strings.
            try:
                f = float(value)
            except ValueError:
                f = None
        if f is None:
            errors.append(f"{key}: expected a number, got {_show(value)}")
            return bad
        if math.isnan(f):
            errors.append(f"{key}: must be a number, got nan")
            return bad
        return f

    if tp is str:
        if isinstance(value, str):
            return value
        errors.append(
            f"{key}: expected a string, got {_show(value)}; quote it in YAML "
            f"({key.rsplit('.', 1)[-1]}: \"{value}\")"
        )
        return bad

    if origin is list or tp is list:
        (item_tp,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, (list, tuple)):
            errors.append(
                f"{key}: expected {_type_name(tp)}, got {_show(value)}; write a YAML list, "
                f"e.g. [a, b]"
            )
            return bad
        out, ok = [], True
        for i, v in enumerate(value):
            c = v if item_tp is Any else _coerce(v, item_tp, f"{key}[{i}]", errors)
            ok &= c is not bad
            out.append(c)
        return out if ok else bad

    if _is_dict(tp):
        if value is None:
            return {}
        if isinstance(value, dict):
            return copy.deepcopy(value)
        errors.append(f"{key}: expected a mapping (key: value pairs), got {_show(value)}")
        return bad

    raise TypeError(f"config schema: unsupported annotation {tp!r} for {key}")  # pragma: no cover


def _check_bounds(value: Any, meta: dict, key: str, errors: list[str]) -> None:
    def cmp(v: Any, where: str) -> None:
        if isinstance(v, float) and math.isinf(v) and not (v > 0 and meta.get("allow_inf")):
            errors.append(f"{where}: must be finite, got {v}")
            return
        for op, test, word in (
            ("gt", lambda a, b: a > b, ">"),
            ("ge", lambda a, b: a >= b, ">="),
            ("lt", lambda a, b: a < b, "<"),
            ("le", lambda a, b: a <= b, "<="),
        ):
            if op in meta and not test(v, meta[op]):
                errors.append(f"{where}: must be {word} {meta[op]}, got {v}")
                return

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        cmp(value, key)
    if meta.get("nonempty") and isinstance(value, (str, list)) and len(value) == 0:
        errors.append(f"{key}: must not be empty")
    if "item_gt" in meta and isinstance(value, list):
        for i, v in enumerate(value):
            if v <= meta["item_gt"]:
                errors.append(f"{key}[{i}]: must be > {meta['item_gt']}, got {v}")


def _build(cls: type, data: Any, prefix: str, errors: list[str]) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        where = f"'{prefix}'" if prefix else "the top level of the config"
        errors.append(f"{where}: expected a mapping (key: value pairs), got {_show(data)}")
        return cls()
    hints = _hints(cls)
    fields = _fields(cls)
    for key in data:
        if key not in fields:
            errors.append(_unknown_key_message(cls, prefix, key))
    kwargs = {}
    for name, tp in hints.items():
        if name not in data:
            continue
        key = _join(prefix, name)
        if _is_section(tp):
            kwargs[name] = _build(tp, data[name], key, errors)
            continue
        value = data[name]
        if value is None and not _is_dict(tp):
            errors.append(f"{key}: must not be null (expected {_type_name(tp)})")
            continue
        v = _coerce(value, tp, key, errors)
        if v is dataclasses.MISSING:
            continue
        _check_bounds(v, fields[name].metadata, key, errors)
        kwargs[name] = v
    return cls(**kwargs)


def _check_cross(cfg: Config, errors: list[str]) -> None:
    """Constraints that involve more than one key."""
    if cfg.model.stem in ("impala", "shallow") and not cfg.model.stem_channels:
        errors.append(
            f"model.stem_channels: must not be empty for model.stem={cfg.model.stem!r} "
            "(e.g. [16, 32, 32])"
        )
    if cfg.stem.freeze and not cfg.stem.path:
        errors.append(
            "stem.freeze: true needs a pretrained stem: set stem.path to a checkpoint "
            "(or stem.freeze=false)"
        )
    if cfg.model.freeze_core and cfg.model.learning == "rtrl":
        errors.append(
            "model.freeze_core: true keeps the core's weights fixed, so RTRL's sensitivities would be computed for "
            "no gradient; set model.learning=tbptt (or model.freeze_core=false)"
        )
    if cfg.model.stem == "none" and cfg.stem.path:
        errors.append("stem.path: is set but model.stem is 'none'; remove stem.path or pick a stem")
    if 0 < cfg.learner.grad_spike_factor <= 1:
        errors.append(
            f"learner.grad_spike_factor: {cfg.learner.grad_spike_factor} would skip ordinary updates; use a "
            "factor well above 1 (e.g. 100) or 0 to turn the check off"
        )
    if cfg.learner.logit_penalty_where == "below_floor" and cfg.learner.entropy_floor <= 0:
        errors.append(
            "learner.logit_penalty_where: 'below_floor' pulls only at steps below the entropy floor, and "
            "learner.entropy_floor is 0 (no floor); set learner.entropy_floor (e.g. 0.9) or "
            "learner.logit_penalty_where=every_step"
        )
    if cfg.algo == "ppo" and cfg.logger.update_log:
        errors.append("logger.update_log: the per-update log is written by the IMPALA and A2C learners; with "
                      "algo=ppo read metrics.csv (logger.log_interval_s sets its rows) or use algo=impala")
    if cfg.algo == "ppo":
        samples = cfg.env.num_envs * cfg.ppo.rollout_length
        if cfg.ppo.minibatches > samples:
            errors.append(
                f"ppo.minibatches: {cfg.ppo.minibatches} is more than the "
                f"{samples} samples per rollout (env.num_envs * ppo.rollout_length)"
            )


def config_from_dict(d: dict) -> Config:
    """Build and validate a :class:`Config` from a plain (nested) dict; missing keys get defaults."""
    errors: list[str] = []
    cfg = _build(Config, d, "", errors)
    if not errors:
        _check_cross(cfg, errors)
    if errors:
        raise ConfigError(errors)
    return cfg


def config_to_dict(cfg: Config) -> dict:
    """A plain, YAML-serialisable nested dict of ``cfg`` (a deep copy)."""
    if not dataclasses.is_dataclass(cfg):
        raise TypeError(f"config_to_dict expects a Config, got {type(cfg).__name__}")
    return dataclasses.asdict(cfg)
