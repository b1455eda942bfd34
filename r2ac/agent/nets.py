"""The R2AC / IMPALA agent network: vision stem -> recurrent core -> policy and baseline heads.

Core input at frame t (Irie et al. 2024, Sec. 4, IMPALA): stem features (256) + the clipped reward received with
frame t (D = 257), optionally + the one-hot action that led to frame t (IMPALA's original).
When the stem is frozen, actors may run it and ship its features; the learner then skips it
(``inputs["features"]`` instead of ``inputs["obs"]``).
"""

from __future__ import annotations

import contextlib
import math

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from r2ac.agent import inputs
from r2ac.agent.stems import make_stem
from r2ac.cores import make_core
from r2ac.cores.base import State


#: ``input_scale: auto`` for image frames that enter the core without a stem (``stem: none``), and for wide
#: flat observations that do (``WIDE_INPUT_ENTRIES`` entries or more)
RAW_PIXEL_INPUT_SCALE = 0.1
#: a flat observation with at least this many entries is wide (MiniGrid's one-hot view: 984, 148 of them 1)
WIDE_INPUT_ENTRIES = 256
#: ``episode_start_value: auto`` for those frames
RAW_PIXEL_EPISODE_START_VALUE = 10.0
#: ``frame_pool: auto`` pools raw frames (``stem: none``) down to at most this many pixels per channel: 24 x 24,
#: the largest frames the defaults were measured on (docs/results.md, "Frames larger than the suite's")
RAW_FRAME_PIXELS = 576


def resolve_frame_pool(frame_pool: int | str, stem: str, observation_shape) -> int:
    """``model.frame_pool`` as a number: the side of the pixel blocks that raw image frames (``stem: none`` on
    (C, H, W) observations) are averaged over before they enter the core (1: as they are). ``"auto"``: the
    smallest that leaves at most :data:`RAW_FRAME_PIXELS` pixels per channel, so frames up to 24 x 24 enter
    as they are, 48 x 48 by 2, 64 x 64 by 3 and 84 x 84 by 4; 1 for other observations and stems.

    Why: every core input carries an RTRL sensitivity per unit, so an update's cost grows with the pixels: on
    the 2-core VM quickstart's settings ran 2.8 k agent steps/s on 24 x 24 frames, 0.8 k on 48 x 48 and 0.46 k
    on 64 x 64 (docs/results.md, "Frames larger than the suite's")."""
    shape = tuple(int(s) for s in observation_shape)
    raw_frames = stem == "none" and len(shape) == 3
    if frame_pool == "auto":
        if not raw_frames:
            return 1
        k = 1
        while -(-shape[1] // k) * -(-shape[2] // k) > RAW_FRAME_PIXELS:
            k += 1
        return k
    if isinstance(frame_pool, bool) or not isinstance(frame_pool, int) or frame_pool < 1:
        raise ValueError(f"model.frame_pool must be a whole number >= 1 or 'auto', got {frame_pool!r}")
    if frame_pool > 1 and not raw_frames:
        raise ValueError(f"model.frame_pool={frame_pool} averages raw image frames that enter the core with stem "
                         f"'none'; this network has stem {stem!r} on observations of shape {shape}: set "
                         "model.frame_pool=1 (or auto)")
    return frame_pool


def _raw_pixels(stem) -> bool:
    return getattr(stem, "kind", None) == "none" and getattr(stem, "is_image", False)


def _wide_flat(stem) -> bool:
    shape = tuple(getattr(stem, "observation_shape", ()) or ())
    return (getattr(stem, "kind", None) == "none" and not getattr(stem, "is_image", False) and len(shape) > 0
            and math.prod(shape) >= WIDE_INPUT_ENTRIES)


def resolve_input_scale(input_scale: float | str, stem) -> float:
    """``model.input_scale`` as a number. ``"auto"``: :data:`RAW_PIXEL_INPUT_SCALE` when raw image frames enter
    the core (stem ``none`` on (C, H, W) observations) or a wide flat observation does (stem ``none``,
    :data:`WIDE_INPUT_ENTRIES` entries or more), 1 otherwise. ``"auto_pixels"``: the rule before wide flat
    observations were scaled (raw image frames only); runs saved before then read ``auto`` as this.

    Why: Adam moves every input weight by about the learning rate per update, and the hundreds of pixels of a
    uniform frame (a cue colour, a noise frame's mean grey) all move the same way, so a gate's pre-activation
    on such a frame moves by hundreds of learning rates per update. Scaling the frames by 0.1 takes the same
    factor off that step (docs/results.md, "Input scale"). A wide many-hot observation is the same case:
    MiniGrid's one-hot view has 148 ones in 984 entries, its gates saturated at scale 1 (median |F x| 8-9) and
    its Memory task stayed at chance; at 0.1 it was solved (docs/results.md, "Wide inputs scaled").
    """
    if input_scale == "auto":
        return RAW_PIXEL_INPUT_SCALE if _raw_pixels(stem) or _wide_flat(stem) else 1.0
    if input_scale == "auto_pixels":
        return RAW_PIXEL_INPUT_SCALE if _raw_pixels(stem) else 1.0
    return _positive("input_scale", input_scale)


def resolve_episode_start_value(value: float | str, stem) -> float:
    """``model.episode_start_value`` as a number. ``"auto"``: :data:`RAW_PIXEL_EPISODE_START_VALUE` when raw
    image frames enter the core (as for ``input_scale``), 1 otherwise.

    Why 10 there: the same Adam argument. An update moves a gate's pre-activation on a full frame by up to the
    learning rate times the frame's summed inputs (a cue colour at scale 0.1: 256 x 0.1 = 25.6; a noise frame:
    768 x 0.05 = 38), on the first frame through the flag by the learning rate times the flag. At 1, the
    pixels' drift outran the flag, saturated the keep gates on every full frame and the distractor cue at
    100x M stayed at chance; at 10 it took 2-3x fewer steps at 10x and 30x M and one of those two seeds solved
    at 100x M, while the blank-frame cue at 30x and 100x M took 1.5x more (docs/results.md, "The flag's value
    on raw pixels")."""
    if value == "auto":
        return RAW_PIXEL_EPISODE_START_VALUE if _raw_pixels(stem) else 1.0
    return _positive("episode_start_value", value)


FRAME_CENTRES = ("mean", "median", "median_mean", "median_feed_mean")  # model.frame_centre
CENTRE_BASES = ("channels", "contrasts")  # model.centre_basis


def resolve_centre_frames(value: bool | str, stem) -> bool:
    """``model.centre_frames`` as a bool. ``"auto"``: true when raw image frames enter the core. True where the
    frames are not raw images is an error (there is no frame to centre).

    Why: the uniform part of a frame (a cue colour, a noise frame's grey, the white query) is one direction
    spread over hundreds of pixel inputs, and Adam moves each of their weights by about the learning rate per
    update, so a gate's drive along that direction moved hundreds of learning rates per update: the keep and
    output gates saturated on every full frame, where the flag and the cue had to open them. Centred, that
    direction is C inputs (the channel means) and moves like any one input; the centred pixels of a noise
    frame point somewhere new each frame and add up to no drift. The distractor cue at 100x M went from
    1 seed of 2 to 3/3 (3.2-7.0 M steps). ``model.frame_centre`` picks the statistic: centred on the mean,
    frames that are mostly a fixed black background (the watermaze) paid, the floor no longer zero (0.6x the
    goals at 2 M steps, 0.34x at 6 M); the median is the background level and leaves such a floor at 0, but
    fed as the centres it gives up the channel means, which carry the T-maze's cue patch as one input each;
    feeding both cost the pixel cue at 100x M. The default, ``median_feed_mean``, subtracts the median and
    feeds the means: the mean's coding on a uniform frame, the floor at 0, and 3/3 on every cell of the
    suite (docs/results.md, "Centred frames", "Mean, median or both" and "Minus the median, the means as
    inputs")."""
    if value == "auto":
        return _raw_pixels(stem)
    if not isinstance(value, bool):
        raise ValueError(f"centre_frames must be true, false or 'auto', got {value!r}")
    if value and not _raw_pixels(stem):
        raise ValueError("model.centre_frames=true needs image frames (C, H, W) entering the core with "
                         f"model.stem=none; this model has stem {getattr(stem, 'kind', stem)!r} on observations "
                         f"{getattr(stem, 'observation_shape', '?')}: set model.centre_frames=false (or auto)")
    return value


def resolve_running_centres(value: bool | str, centre_frames: bool) -> bool:
    """``model.running_centres`` as a bool. ``"auto"``: true where frames are centred (``centre_frames``).

    Why: the channel centres are the frame's uniform part, and a frame kind that fills many steps (a noise
    frame's grey, 0.5 in every channel) feeds all C of them the same positive value step after step. Through
    the RTRL sensitivities of the C input columns (``Zhat(t) = ch * Zhat(t-1) + outer(zh, x(t))``) those
    frames add one large common term to the gradient of every column, while the cue's colour lives only in
    the columns' differences; Adam normalises each weight by its gradient's size, so the common term shrank
    the colour's steps. Centred on their running mean over the frames trained on, those frames feed about 0
    on average, and a cue shown among noise frames at a time nothing marks went from chance to solved
    (docs/results.md, "A cue among noise frames at an unknown time")."""
    return _on_where_frames_are_centred("running_centres", value, centre_frames,
                                        "it centres the channel centres they feed")


def _on_where_frames_are_centred(key: str, value: bool | str, centre_frames: bool, what: str) -> bool:
    """A ``model.<key>`` that is true, false or ``"auto"`` (true where frames are centred) as a bool; ``true``
    without centred frames is an error that says ``what`` the key does with them."""
    if value == "auto":
        return bool(centre_frames)
    if not isinstance(value, bool):
        raise ValueError(f"model.{key} must be true, false or 'auto', got {value!r}")
    if value and not centre_frames:
        raise ValueError(f"model.{key}=true needs centred frames (model.centre_frames true, or auto with raw image "
                         f"frames and stem none): {what}; set model.{key}=false (or auto)")
    return value


def resolve_frame_extremes(value: bool | str, centre_frames: bool) -> bool:
    """``model.frame_extremes`` as a bool. ``"auto"``: true where frames are centred (``centre_frames``).

    Why: the channel centres feed a small object's colour only by its share of the frame (a 6 x 6 square on a
    64 x 64 frame moves a channel's mean by under 1% of its colour), and a linear read of the pixels has to learn
    each place the object can be. Each channel's largest and smallest centred value carry the object's full
    colour wherever it is: ColourPatch with a 6 x 6 cue on 64 x 64 frames went from 0.52 success after 25
    minutes to solved in 3-4 on 3/3 seeds, and the pixel suite kept its steps (docs/results.md, "A small square
    on a large frame")."""
    return _on_where_frames_are_centred("frame_extremes", value, centre_frames, "the extremes are each channel's "
                                        "largest and smallest distance from its centre")


def resolve_frame_centroids(value: bool | str, centre_frames: bool) -> bool:
    """``model.frame_centroids`` as a bool. ``"auto"``: true where frames are centred (``centre_frames``).

    Why: each channel's centroid of what lies above its centre (``inputs.channel_centroids``) gives a small
    object's place as two numbers wherever it is, where a linear read of the pixels has to learn a weight for
    each place the object can be (docs/results.md, "Where an object is, as two numbers")."""
    return _on_where_frames_are_centred("frame_centroids", value, centre_frames, "the centroids are each channel's "
                                        "mean place of what lies above its centre")


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0 or 'auto', got {value!r}")
    return float(value)


class AgentNet(nn.Module):
    def __init__(self, observation_shape: Tuple[int, ...], num_actions: int, *, stem: str = "impala",
                 stem_channels=(16, 32, 32), stem_fc: int = 256, core: str = "elstm", hidden_size: int = 512,
                 learning: str = "rtrl", core_options: Optional[dict] = None, reward_input: bool = True,
                 prev_action_input: bool | str = False, reward_clip: float = 1.0, input_scale: float | str = "auto",
                 carry_inputs_across_episodes: bool = False, episode_start_input: bool = False,
                 episode_start_value: float | str = "auto", centre_frames: bool | str = "auto",
                 frame_centre: str = "median_feed_mean", frame_spread: bool = False,
                 running_centres: bool | str = False, head_hidden: int = 0, head_input: bool = False,
                 head_norm: bool = False, centre_basis: str = "channels", centre_observations: bool = False,
                 frame_pool: int | str = 1, frame_extremes: bool | str = False, frame_centroids: bool | str = False):
        super().__init__()
        self.observation_shape = tuple(observation_shape)
        self.num_actions = int(num_actions)
        self.frame_pool = resolve_frame_pool(frame_pool, stem, self.observation_shape)
        self.stem = make_stem(stem, self.observation_shape, list(stem_channels), stem_fc, pool=self.frame_pool)
        self.reward_input = reward_input
        if prev_action_input not in (True, False, "auto"):
            raise ValueError(f"prev_action_input must be true, false or 'auto', got {prev_action_input!r}")
        # 'auto' depends on the task, which a network does not know: r2ac.runtime.build_net resolves it per env
        # (r2ac.runtime.resolve_model); a network built from a model config alone has no task that asks for it
        self.prev_action_input = prev_action_input is True
        self.carry_inputs_across_episodes = bool(carry_inputs_across_episodes)
        self.episode_start_input = bool(episode_start_input)
        self.reward_clip = float(reward_clip)
        self.input_scale = resolve_input_scale(input_scale, self.stem)
        self.episode_start_value = resolve_episode_start_value(episode_start_value, self.stem)
        self.centre_frames = resolve_centre_frames(centre_frames, self.stem)
        self.frame_channels = self.observation_shape[0] if self.centre_frames else 0
        if frame_centre not in FRAME_CENTRES:
            raise ValueError(f"model.frame_centre must be one of {', '.join(FRAME_CENTRES)}, got {frame_centre!r}")
        self.frame_centre = frame_centre
        if not isinstance(frame_spread, bool):
            raise ValueError(f"model.frame_spread must be true or false, got {frame_spread!r}")
        if frame_spread and not self.centre_frames:
            raise ValueError("model.frame_spread=true needs centred frames (model.centre_frames true, or auto with "
                             "raw image frames and stem none): the spread is each channel's mean distance from "
                             "its centre; set model.frame_spread=false")
        self.frame_spread = frame_spread
        self.frame_extremes = resolve_frame_extremes(frame_extremes, self.centre_frames)
        self.frame_centroids = resolve_frame_centroids(frame_centroids, self.centre_frames)
        centre_inputs = self.frame_channels * ((2 if frame_centre == "median_mean" else 1) + (
            1 if frame_spread else 0) + (2 if self.frame_extremes else 0) + (2 if self.frame_centroids else 0))
        self.running_centres = resolve_running_centres(running_centres, self.centre_frames)
        if centre_basis not in CENTRE_BASES:
            raise ValueError(f"model.centre_basis must be one of {', '.join(CENTRE_BASES)}, got {centre_basis!r}")
        self.centre_basis = centre_basis
        if centre_basis == "contrasts" and self.frame_channels:  # fixed, not learned: a buffer, saved with the net
            self.register_buffer("centre_rotation", inputs.helmert_basis(self.frame_channels))
        if self.running_centres:  # the running mean of the frame statistics, and how many frames it holds
            self.register_buffer("centre_mean", torch.zeros(centre_inputs))
            self.register_buffer("centre_frames_seen", torch.zeros((), dtype=torch.float64))
        if not isinstance(centre_observations, bool):
            raise ValueError(f"model.centre_observations must be true or false, got {centre_observations!r}")
        if centre_observations and (stem != "none" or self.centre_frames):
            raise ValueError("model.centre_observations=true is for flat observations that enter the core as they "
                             "are (model.stem=none, not image frames: those have model.centre_frames); set "
                             "model.centre_observations=false")
        self.centre_observations = centre_observations
        if centre_observations:  # the running mean of every observation trained on, and how many it holds
            self.register_buffer("observation_mean", torch.zeros(self.stem.output_size))
            self.register_buffer("observations_seen", torch.zeros((), dtype=torch.float64))
        self.feature_size = self.stem.output_size + centre_inputs
        self.core_input_size = inputs.core_input_size(self.feature_size, reward_input, self.prev_action_input,
                                                      num_actions, self.episode_start_input)
        self.core = make_core(core, self.core_input_size, hidden_size, learning=learning, **(core_options or {}))
        if not isinstance(head_hidden, int) or isinstance(head_hidden, bool) or head_hidden < 0:
            raise ValueError(f"model.head_hidden must be a whole number >= 0 (0: linear heads), got {head_hidden!r}")
        if not isinstance(head_input, bool):
            raise ValueError(f"model.head_input must be true or false, got {head_input!r}")
        if not isinstance(head_norm, bool):
            raise ValueError(f"model.head_norm must be true or false, got {head_norm!r}")
        self.head_hidden, self.head_input = head_hidden, head_input
        head_size = self.core.output_size + (self.core_input_size if head_input else 0)
        # the heads' input layer-normalised (no parameters): every step's feature vector has the same norm
        self.head_norm = nn.LayerNorm(head_size, elementwise_affine=False) if head_norm else None
        # the heads' shared hidden layer (absent, and no parameters, with head_hidden 0: the papers' linear heads)
        self.head_trunk = nn.Sequential(nn.Linear(head_size, head_hidden), nn.Tanh()) if head_hidden else None
        head_size = head_hidden or head_size
        self.policy = nn.Linear(head_size, num_actions)
        self.baseline = nn.Linear(head_size, 1)
        self.stem_frozen = False

    @classmethod
    def from_config(cls, model_cfg, observation_shape, num_actions, reward_clip: float = 1.0) -> "AgentNet":
        return cls(observation_shape, num_actions, stem=model_cfg.stem, stem_channels=model_cfg.stem_channels,
                   stem_fc=model_cfg.stem_fc, core=model_cfg.core, hidden_size=model_cfg.hidden_size,
                   learning=model_cfg.learning, core_options=dict(model_cfg.core_options),
                   reward_input=model_cfg.reward_input, prev_action_input=model_cfg.prev_action_input,
                   reward_clip=reward_clip, input_scale=model_cfg.input_scale,
                   carry_inputs_across_episodes=model_cfg.carry_inputs_across_episodes,
                   episode_start_input=model_cfg.episode_start_input,
                   episode_start_value=model_cfg.episode_start_value,
                   centre_frames=model_cfg.centre_frames, frame_centre=model_cfg.frame_centre,
                   frame_spread=model_cfg.frame_spread, running_centres=model_cfg.running_centres,
                   head_hidden=model_cfg.head_hidden, head_input=model_cfg.head_input,
                   head_norm=model_cfg.head_norm, centre_basis=model_cfg.centre_basis,
                   centre_observations=model_cfg.centre_observations, frame_pool=model_cfg.frame_pool,
                   frame_extremes=model_cfg.frame_extremes, frame_centroids=model_cfg.frame_centroids)

    def freeze_stem(self) -> None:
        """Keep the stem's weights fixed (and out of the optimizer: see ``trainable_parameters``)."""
        self.stem_frozen = True
        for p in self.stem.parameters():
            p.requires_grad_(False)
        self.stem.eval()

    def freeze_core(self) -> None:
        """Keep the core's weights as initialised (``model.freeze_core``): no gradient reaches them and the
        optimizer leaves them out (``trainable_parameters``); only what reads the core's output learns."""
        for p in self.core.parameters():
            p.requires_grad_(False)

    def trainable_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def initial_state(self, batch_size: int, device=None, sensitivities: bool = True) -> State:
        return self.core.initial_state(batch_size, device=device, sensitivities=sensitivities)

    def features(self, obs: Tensor) -> Tensor:
        """Stem features of frames [T, B, *obs_shape] -> [T, B, stem.output_size], in the core's dtype: a
        parameter-free stem (``none``) keeps floating frames' dtype and gives 8-bit ones the default one, so a
        net moved to float64 (``.double()``) would otherwise get float32 features from an env's frames."""
        with torch.no_grad() if self.stem_frozen else contextlib.nullcontext():
            feats = self.stem(obs)
        ref = self.core._param_ref()
        return feats.to(ref.dtype) if ref is not None and feats.dtype != ref.dtype else feats

    def scaled_features(self, features: Tensor, frame_stats: Optional[Tuple[Tensor, Tensor]] = None) -> Tensor:
        """The features' part of the core input [..., feature_size]: the stem's features times ``input_scale``;
        with ``centre_frames``, each channel of the raw frame minus its median or mean (``frame_centre``)
        over the frame (times ``input_scale``), then the C (or 2C) channel centres, unscaled
        (``inputs.centre_frame``), then with ``frame_spread`` the C channel spreads, unscaled
        (``inputs.channel_spread``), then with ``frame_extremes`` the C channel maxima and C minima, unscaled
        (``inputs.channel_extremes``), then with ``frame_centroids`` the C x and C y centroids, unscaled
        (``inputs.channel_centroids``); with ``running_centres`` the centres, spreads, extremes and centroids
        minus their running mean (``observe_frames``); with ``centre_basis: contrasts`` each group of C of them
        re-coded in the orthonormal basis of ``inputs.helmert_basis``. With ``centre_observations`` (flat
        observations, stem none) the observation minus its running mean (``observe_frames``), times
        ``input_scale``.
        ``frame_stats``: ``frame_stats(features)`` where the caller has it already."""
        if self.centre_frames:
            pixels, stats = frame_stats if frame_stats is not None else self.frame_stats(features)
            if self.running_centres:
                stats = stats - self.centre_mean.to(stats.dtype)
            if self.centre_basis == "contrasts":
                C = self.frame_channels
                rot = self.centre_rotation.to(stats.dtype)
                stats = (stats.unflatten(-1, (stats.shape[-1] // C, C)) @ rot.T).flatten(-2)
            return torch.cat([pixels * self.input_scale, stats], -1)
        if self.centre_observations:
            features = features.to(self.observation_mean.dtype) - self.observation_mean  # in the net's dtype
        return features * self.input_scale if self.input_scale != 1.0 else features

    def frame_stats(self, features: Tensor, obs: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """Raw frames [..., C*H*W] -> (centred pixels, unscaled; the channel centres then spreads [..., K]).
        ``obs``: the uint8 frames the features came from, if the caller has them (a faster median on the CPU,
        ``inputs.lower_median``; the same numbers)."""
        levels = None
        if obs is not None and obs.dtype == torch.uint8 and obs.shape[-3:] == self.observation_shape:
            # pooled frames: the stem's levels / 255 (``IdentityStem.pooled``), so x 255 gives the levels back
            # exactly, without pooling the frames a second time
            levels = (obs.reshape(*features.shape) if self.frame_pool == 1
                      else features.detach().mul(255).round_().to(torch.uint8))
        pixels, centres = inputs.centre_frame(features, self.frame_channels, self.frame_centre, levels)
        if self.frame_spread:
            centres = torch.cat([centres, inputs.channel_spread(pixels, self.frame_channels)], -1)
        if self.frame_extremes:
            centres = torch.cat([centres, inputs.channel_extremes(pixels, self.frame_channels)], -1)
        if self.frame_centroids:
            _, height, width = self.stem.frame_shape
            centres = torch.cat([centres, inputs.channel_centroids(pixels, self.frame_channels, height, width)], -1)
        return pixels, centres

    @torch.no_grad()
    def observe_frames(self, obs: Tensor, stats: Optional[Tensor] = None) -> None:
        """``running_centres``: fold the frame statistics of these frames [..., *obs_shape] into their running
        mean (the mean over every frame observed so far); ``centre_observations``: likewise the observations
        themselves; a no-op otherwise. The learners call it after each
        applied update with the batch's new frames; the mean travels with the weights (a buffer of the
        state dict) to the actors and into checkpoints. ``stats``: the frames' statistics, the second part of
        ``frame_stats``, where the caller has them (the learner's forward does: ``outputs["frame_stats"]``)."""
        if self.centre_observations:
            flat = self.features(obs).reshape(-1, self.stem.output_size).to(torch.float64)
            seen = self.observations_seen + flat.shape[0]
            mean = self.observation_mean.to(torch.float64)
            self.observation_mean.copy_((mean + (flat.sum(0) - flat.shape[0] * mean) / seen).to(
                self.observation_mean.dtype))
            self.observations_seen.copy_(seen)
        if not self.running_centres:
            return
        if stats is None:
            _, stats = self.frame_stats(self.features(obs), obs)
        flat = stats.reshape(-1, stats.shape[-1]).to(torch.float64)
        seen = self.centre_frames_seen + flat.shape[0]
        mean = self.centre_mean.to(torch.float64)
        self.centre_mean.copy_((mean + (flat.sum(0) - flat.shape[0] * mean) / seen).to(self.centre_mean.dtype))
        self.centre_frames_seen.copy_(seen)

    def core_input(self, features: Tensor, reward: Tensor, prev_action: Tensor,
                   done: Optional[Tensor] = None, frame_stats: Optional[Tuple[Tensor, Tensor]] = None) -> Tensor:
        """The core's input (``r2ac.agent.inputs.core_input``): ``scaled_features``, clipped
        reward, one-hot action; where ``done`` (the frame starts an episode) the reward and action are the
        previous episode's and are zeroed, unless ``carry_inputs_across_episodes``: the core state is reset
        there, and a reward carried in would let a policy chain episodes (store a cue only after a paid one).
        With ``episode_start_input`` the flag itself is one more input (``episode_start_value`` on an
        episode's first frame, 0 elsewhere). ``frame_stats``: as in ``scaled_features``."""
        features = self.scaled_features(features, frame_stats)
        keep = None if done is None or self.carry_inputs_across_episodes else (~done).to(features.dtype)
        if self.episode_start_input and done is None:
            raise ValueError("episode_start_input needs the done flags of the frames (which start an episode)")
        return inputs.core_input(features, reward, prev_action, reward_input=self.reward_input,
                                 prev_action_input=self.prev_action_input, action_dim=self.num_actions,
                                 reward_clip=self.reward_clip, keep=keep,
                                 first=done if self.episode_start_input else None,
                                 first_value=self.episode_start_value)

    def heads(self, y: Tensor, x: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Policy logits and baseline from the core's output ``y`` [..., N]; with ``head_input`` the heads see
        the core's input ``x`` of the same step too, and with ``head_hidden`` both go through one shared tanh
        layer first. Neither is in the recurrence: the gradient through them is the ordinary one, and the
        core's (RTRL or TBPTT) takes dL/dy from them as from linear heads. With ``head_norm`` the heads' input
        is layer-normalised first."""
        if self.head_input:
            if x is None:
                raise ValueError("model.head_input=true: the heads need the core's input x of the same step")
            y = torch.cat([y, x.to(y.dtype)], -1)
        if self.head_norm is not None:
            y = self.head_norm(y)
        if self.head_trunk is not None:
            y = self.head_trunk(y)
        return {"policy_logits": self.policy(y), "baseline": self.baseline(y).squeeze(-1)}

    def forward(self, inputs: Dict[str, Tensor], state: State, return_state: bool = True,
                sensitivities: bool = True):
        """inputs: time-major ``obs`` [T, B, ...] (or ``features`` [T, B, F]), ``reward`` [T, B],
        ``action`` [T, B] (the action that led to each frame), ``done`` [T, B] bool (frame t starts a new
        episode: the core state is reset before it). Returns (outputs, next_state); with ``centre_frames`` the
        outputs hold the frames' statistics too (``frame_stats``, unaffected by the weights)."""
        feats = inputs["features"] if "features" in inputs else self.features(inputs["obs"])
        stats = self.frame_stats(feats, inputs.get("obs")) if self.centre_frames else None
        x = self.core_input(feats, inputs["reward"], inputs["action"], inputs["done"], stats)
        out, state = self.from_core_input(x, inputs["done"], state, return_state, sensitivities)
        if stats is not None:
            out["frame_stats"] = stats[1]
        return out, state

    def from_core_input(self, x: Tensor, done: Tensor, state: State, return_state: bool = True,
                        sensitivities: bool = True):
        """``forward`` from the core's input ``x`` [T, B, input_size] (a forward pass's ``core_input``) and the
        done flags: the core and the heads only. The learner's target network runs on the online network's
        ``core_input`` this way when no trainable weight lies before the core (``Learner.target_values``)."""
        y, state = self.core(x, state, done, return_state=return_state, sensitivities=sensitivities)
        out = self.heads(y, x)
        out["core_input"] = x
        out["core_output"] = y  # what the heads read (r2ac.bench.probe's read-outs train on it)
        return out, state
