"""The recurrent core's input, one builder for every agent: features of the current observation, then
(optionally) the previous reward, the previous action and the episode-start flag:

    x_t = [ features(o_t),  r_t (clipped to [-c, c] if c > 0),  onehot(a_{t-1}) | clip(a_{t-1}, -1, 1),  first_t ]

IMPALA/R2AC (``r2ac.agent.nets.AgentNet``): stem features, the reward received with frame t, the one-hot
action that led to it (IMPALA's input, the R2AC paper's Sec. 4), both zeroed on the first frame of an
episode (they belong to the previous one; ``model.carry_inputs_across_episodes=true`` keeps them). PPO
(``r2ac.agent.ppo``): the normalised observation, with reward and action zeroed where an episode starts
(``keep`` = 0 there), discrete actions one-hot, continuous ones clipped to the action box [-1, 1]. Either
agent appends first_t (``model.episode_start_value``, 1 by default, where frame t starts an episode; 0
elsewhere) with ``model.episode_start_input``.
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["centre_frame", "channel_spread", "core_input", "core_input_size", "lower_median"]


def core_input_size(feature_size: int, reward_input: bool, prev_action_input: bool, action_dim: int,
                    episode_start_input: bool = False) -> int:
    """Width of x_t: the features, 1 for the reward, ``action_dim`` for the previous action, 1 for the
    episode-start flag."""
    return (int(feature_size) + int(reward_input) + (int(action_dim) if prev_action_input else 0)
            + int(episode_start_input))


def lower_median(x: Tensor, levels: Optional[Tensor] = None) -> Tensor:
    """The median of ``x`` [..., n] over its last dimension, keepdim [..., 1]; for even n the lower of the two
    middle values, as ``torch.median``. ``levels``: the 8-bit values ``x`` was scaled from (uint8, ``x.shape``,
    ``x == levels.to(x.dtype) / 255``, as image stems convert frames): on the CPU the median is then read off
    numpy's sort of the 8-bit values (a radix sort, 5-7x faster than ``torch.median`` on frames of 256 pixels
    per channel) and converted as the frames were, so it is the same element of ``x`` bit for bit (a test).
    Anywhere else (no levels, another device, ``x`` needing a gradient) it is ``torch.median``."""
    if levels is None or levels.device.type != "cpu" or x.requires_grad:
        return x.median(-1, keepdim=True).values
    if levels.dtype != torch.uint8 or levels.shape != x.shape:
        raise ValueError(f"lower_median: levels must be uint8 of the shape of x {tuple(x.shape)}, got "
                         f"{levels.dtype} {tuple(levels.shape)}")
    k = (x.shape[-1] - 1) // 2
    srt = np.sort(levels.numpy(), axis=-1, kind="stable")  # numpy sorts 8-bit integers by radix sort
    return torch.from_numpy(np.ascontiguousarray(srt[..., k:k + 1])).to(x.device).to(x.dtype) / 255.0


def centre_frame(pixels: Tensor, channels: int, statistic: str = "mean",
                 levels: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """Flattened image frames [..., C*H*W] (channel-major) -> (each channel minus its centre over the frame
    [..., C*H*W], the channel centres [..., C]). The pair is an invertible re-coding of the frame: it takes the
    uniform part of every channel (a colour, a frame's overall brightness) out of the hundreds of pixel
    inputs and into C inputs of its own.

    ``statistic``: ``"mean"``, ``"median"`` (the lower middle value where a channel has an even number of
    pixels), ``"median_mean"`` (pixels minus the median, and both the C medians and the C means as centres
    [..., 2C]) or ``"median_feed_mean"`` (pixels minus the median, and the C means as centres: still
    invertible, as the median is the mean minus the centred pixels' mean). The median is the channel's
    background level: a uniform colour or a noise frame's grey is taken out as by the mean, but a small
    object on a fixed background (an agent's cell on a black floor) leaves the background at 0, so pixels
    that are 0 on most frames stay 0; the mean says how much of a colour a frame holds (a small cue patch
    moves it).

    ``levels``: the uint8 frames [..., C*H*W] the pixels were scaled from (``pixels == levels / 255``), which
    only makes the median faster on the CPU (``lower_median``); the result is the same."""
    if pixels.shape[-1] % channels:
        raise ValueError(f"centre_frame: {pixels.shape[-1]} pixel features do not split into {channels} channels")
    x = pixels.unflatten(-1, (channels, pixels.shape[-1] // channels))
    if statistic == "mean":
        m = x.mean(-1, keepdim=True)
    elif statistic in ("median", "median_mean", "median_feed_mean"):
        m = lower_median(x, None if levels is None else levels.unflatten(-1, x.shape[-2:]))
    else:
        raise ValueError("centre_frame: statistic must be 'mean', 'median', 'median_mean' or 'median_feed_mean', "
                         f"got {statistic!r}")
    centres = m.squeeze(-1)
    if statistic == "median_mean":
        centres = torch.cat([centres, x.mean(-1)], -1)
    elif statistic == "median_feed_mean":
        centres = x.mean(-1)
    return (x - m).flatten(-2), centres


def helmert_basis(channels: int) -> Tensor:
    """The C x C orthonormal matrix whose rows are: all channels equally (1 / sqrt(C) each: the grey level),
    then for k = 1 .. C - 1 the contrast of channel k against the k before it (Helmert's contrasts:
    (1, ..., 1, -k, 0, ..., 0) / sqrt(k (k + 1))). For RGB: (R + G + B) / sqrt(3), (R - G) / sqrt(2) and
    (R + G - 2B) / sqrt(6). A rotation: it keeps lengths and loses nothing; a grey input (the same value in
    every channel) lies on the first axis alone."""
    if not isinstance(channels, int) or channels < 1:
        raise ValueError(f"helmert_basis: channels must be a positive int, got {channels!r}")
    H = torch.zeros(channels, channels, dtype=torch.float64)
    H[0] = 1.0 / math.sqrt(channels)
    for k in range(1, channels):
        H[k, :k] = 1.0 / math.sqrt(k * (k + 1))
        H[k, k] = -k / math.sqrt(k * (k + 1))
    return H.to(torch.get_default_dtype())


def channel_spread(centred: Tensor, channels: int) -> Tensor:
    """Centred frames [..., C*H*W] (``centre_frame``'s first output) -> each channel's mean absolute value over
    the frame [..., C]: how far a channel's pixels lie from its centre, the frame's contrast. A uniform frame
    (a colour, black, white) has 0 in every channel; a frame of uniform noise in [0, 1] about 0.25."""
    if centred.shape[-1] % channels:
        raise ValueError(f"channel_spread: {centred.shape[-1]} pixel features do not split into {channels} channels")
    return centred.unflatten(-1, (channels, centred.shape[-1] // channels)).abs().mean(-1)


def channel_extremes(centred: Tensor, channels: int) -> Tensor:
    """Centred frames [..., C*H*W] (``centre_frame``'s first output) -> each channel's largest then smallest
    value over the frame [..., 2C] (the C maxima, then the C minima): where a frame's most extreme pixels lie
    from its centre, wherever in the frame they are. A small square of colour moves them as much as a large
    one, where it moves the channel means by its share of the frame."""
    if centred.shape[-1] % channels:
        raise ValueError(f"channel_extremes: {centred.shape[-1]} pixel features do not split into {channels} "
                         "channels")
    per_channel = centred.unflatten(-1, (channels, centred.shape[-1] // channels))
    return torch.cat([per_channel.amax(-1), per_channel.amin(-1)], -1)


def channel_centroids(centred: Tensor, channels: int, height: int, width: int) -> Tensor:
    """Centred frames [..., C*H*W] (``centre_frame``'s first output) -> each channel's centroid of what lies
    above its centre [..., 2C] (the C x coordinates, then the C y coordinates, each in [-1, 1]: -1 the left
    column or the top row, 1 the right or the bottom): the mean place of the pixels brighter than the channel's
    centre, weighted by how much brighter. Where a channel has nothing above its centre (a uniform frame, a
    black one) both are 0. A small object's place, read linearly wherever it is: from the pixels a linear read
    of the place needs a weight at every place the object can be, each learned only on the frames that show
    it there."""
    if centred.shape[-1] != channels * height * width:
        raise ValueError(f"channel_centroids: {centred.shape[-1]} pixel features are not {channels} channels of "
                         f"{height} x {width}")
    above = centred.unflatten(-1, (channels, height * width)).clamp_min(0)
    grid = _place_grid(height, width, centred.dtype, centred.device)
    moments = (above.reshape(-1, height * width) @ grid).view(*above.shape[:-1], 3)  # [..., C, 3]: mass, x, y sums
    mass = moments[..., :1].clamp_min(1.0 / 255)  # nothing above the centre: 0 / (1 / 255) = 0
    return (moments[..., 1:] / mass).transpose(-1, -2).flatten(-2)


@functools.lru_cache(maxsize=16)
def _place_grid(height: int, width: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """[H*W, 3]: per pixel (row-major) 1, its x and its y, each on n places from -1 to 1 (one place: 0)."""
    def places(n):
        half = (n - 1) / 2
        return (torch.arange(n, dtype=torch.float64) - half) / max(half, 1.0)

    ys, xs = torch.meshgrid(places(height), places(width), indexing="ij")
    return torch.stack([torch.ones(height * width, dtype=torch.float64), xs.flatten(), ys.flatten()], -1).to(
        dtype=dtype, device=device)


def core_input(features: Tensor, reward: Tensor, prev_action: Tensor, *, reward_input: bool,
               prev_action_input: bool, action_dim: int, discrete: bool = True, reward_clip: float = 0.0,
               keep: Optional[Tensor] = None, first: Optional[Tensor] = None, first_value: float = 1.0) -> Tensor:
    """x_t from features [..., F], reward [...], prev_action [...] (discrete indices) or [..., A]
    (continuous); ``keep`` [...] (0/1, features' dtype) multiplies the reward and action parts; ``first``
    [...] (bool: the frame starts an episode), when given, is appended as one more input (``first_value``
    there, else 0)."""
    parts = [features]
    if reward_input:
        r = reward.to(features.dtype)
        if reward_clip > 0:
            r = r.clamp(-reward_clip, reward_clip)
        if keep is not None:
            r = r * keep
        parts.append(r.unsqueeze(-1))
    if prev_action_input:
        if discrete:
            a = F.one_hot(prev_action.long(), action_dim).to(features.dtype)
        else:
            a = prev_action.to(features.dtype).clamp(-1, 1)
        if keep is not None:
            a = a * keep.unsqueeze(-1)
        parts.append(a)
    if first is not None:
        flag = first.to(features.dtype).unsqueeze(-1)
        parts.append(flag * first_value if first_value != 1.0 else flag)
    return torch.cat(parts, -1) if len(parts) > 1 else features
