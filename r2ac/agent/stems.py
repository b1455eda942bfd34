"""Observation stems: per-frame encoders that turn one observation into one feature vector.

Every stem maps an input of shape ``[*lead, *observation_shape]`` to ``[*lead, output_size]``
(any leading dims, e.g. ``[N]`` or time-major ``[T, B]``) and carries ``kind``,
``observation_shape``, ``channels``, ``fc`` and ``output_size`` attributes.

Image stems take ``[*, C, H, W]``. uint8 frames are converted to float and divided by 255 inside
the stem; floating-point frames are used as given (expected already in [0, 1]). Vector stems take
``[*, D]`` and cast to float without rescaling.

* ``impala``  — IMPALA's deep ResNet (Espeholt et al. 2018, Fig. 3 right): per stage
  conv3x3(s1,p1) -> maxpool3x3(s2,p1) -> 2 x [x + conv3x3(relu(conv3x3(relu(x))))]; then relu,
  flatten, FC -> fc, relu. Each stage maps H -> ceil(H / 2): DMLab 72x96 -> 32x9x12,
  Atari 84x84 -> 32x11x11, ProcGen 64x64 -> 32x8x8.
* ``shallow`` — IMPALA's shallow model (Fig. 3 left): conv8x8(s4) 16ch, relu, conv4x4(s2) 32ch,
  relu, flatten, FC -> fc, relu; orthogonal init with gain sqrt(2), zero biases (as in A2C/PPO Atari code).
* ``mlp``     — vector observations (or small images, flattened): Linear + relu layers of sizes
  (*channels, fc).
* ``none``    — identity on flattened observations (images scaled by 1/255); output_size = prod(shape).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = [
    "IMAGE_STEMS",
    "STEMS",
    "VECTOR_STEMS",
    "IdentityStem",
    "Stem",
    "ImpalaResNetStem",
    "MLPStem",
    "ShallowAtariStem",
    "make_stem",
    "stem_metadata",
]

IMAGE_STEMS = ("impala", "shallow")
VECTOR_STEMS = ("mlp", "none")
STEMS = IMAGE_STEMS + VECTOR_STEMS


def _image_to_float(x: Tensor, dtype: torch.dtype) -> Tensor:
    """uint8 frames -> x / 255 in ``dtype``; floating frames are only cast to ``dtype``."""
    if x.dtype == torch.uint8:
        return x.to(dtype) / 255.0
    if not x.dtype.is_floating_point:
        raise TypeError(f"image stem input must be uint8 or floating point, got {x.dtype}")
    return x.to(dtype)


def _vector_to_float(x: Tensor, dtype: torch.dtype) -> Tensor:
    """Vector observations are cast to ``dtype`` as numbers (no /255: they are not pixels)."""
    return x.to(dtype)


def _split_lead(x: Tensor, obs_ndim: int, observation_shape: tuple[int, ...]) -> tuple[Tensor, tuple]:
    """[*lead, *obs] -> ([prod(lead), *obs], lead), checking the observation dims."""
    if x.dim() < obs_ndim or tuple(x.shape[x.dim() - obs_ndim:]) != tuple(observation_shape):
        raise ValueError(
            f"stem expects input [..., {', '.join(map(str, observation_shape))}], "
            f"got shape {tuple(x.shape)}"
        )
    lead = tuple(x.shape[: x.dim() - obs_ndim])
    return x.reshape(-1, *observation_shape), lead


class Stem(nn.Module):
    """Base class: forward([*lead, *observation_shape]) -> [*lead, output_size]."""

    is_image = False
    kind: str
    observation_shape: tuple[int, ...]
    channels: tuple[int, ...]
    fc: int | None
    output_size: int

    def _param_dtype(self) -> torch.dtype:
        p = next(self.parameters(), None)
        return p.dtype if p is not None else torch.get_default_dtype()

    def encode(self, x: Tensor) -> Tensor:  # [N, *obs] float -> [N, output_size]
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        x, lead = _split_lead(x, len(self.observation_shape), self.observation_shape)
        to_float = _image_to_float if self.is_image else _vector_to_float
        y = self.encode(to_float(x, self._param_dtype()))
        return y.reshape(*lead, self.output_size)


class ResidualBlock(nn.Module):
    """y = x + conv3x3(relu(conv3x3(relu(x)))), channels unchanged."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, stride=1, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ImpalaStage(nn.Module):
    """conv3x3(s1,p1) -> maxpool3x3(s2,p1) -> two residual blocks. H -> ceil(H / 2)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.res0 = ResidualBlock(out_channels)
        self.res1 = ResidualBlock(out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.res1(self.res0(self.pool(self.conv(x))))


def _pool_size(n: int) -> int:
    """Output length of maxpool(kernel 3, stride 2, padding 1): floor((n + 2 - 3) / 2) + 1."""
    return (n - 1) // 2 + 1


def _conv_size(n: int, kernel: int, stride: int) -> int:
    """Output length of an unpadded convolution: floor((n - kernel) / stride) + 1."""
    return (n - kernel) // stride + 1


class ImpalaResNetStem(Stem):
    """IMPALA deep ResNet stem: 3 stages (16, 32, 32 channels), relu, flatten, FC -> fc, relu."""

    is_image = True

    def __init__(self, in_channels: int, height: int, width: int,
                 channels: Sequence[int] = (16, 32, 32), fc: int = 256) -> None:
        super().__init__()
        self.kind = "impala"
        self.observation_shape = (int(in_channels), int(height), int(width))
        self.channels = tuple(int(c) for c in channels)
        self.fc = int(fc)
        if not self.channels:
            raise ValueError("ImpalaResNetStem needs at least one stage (channels is empty)")
        stages, c, h, w = [], int(in_channels), int(height), int(width)
        for out_c in self.channels:
            stages.append(ImpalaStage(c, out_c))
            c, h, w = out_c, _pool_size(h), _pool_size(w)
        self.stages = nn.Sequential(*stages)
        self.feature_map_shape = (c, h, w)
        self.flatten_size = c * h * w
        self.linear = nn.Linear(self.flatten_size, self.fc)
        self.output_size = self.fc

    def encode(self, x: Tensor) -> Tensor:
        x = F.relu(self.stages(x)).flatten(1)
        return F.relu(self.linear(x))


class ShallowAtariStem(Stem):
    """IMPALA shallow model: conv8x8 s4 (16), relu, conv4x4 s2 (32), relu, FC -> fc, relu."""

    is_image = True

    def __init__(self, in_channels: int, height: int, width: int,
                 channels: Sequence[int] = (16, 32), fc: int = 256) -> None:
        super().__init__()
        self.kind = "shallow"
        self.observation_shape = (int(in_channels), int(height), int(width))
        self.channels = tuple(int(c) for c in channels)
        self.fc = int(fc)
        if len(self.channels) != 2:
            raise ValueError(f"ShallowAtariStem takes two conv widths, got channels={self.channels}")
        h = _conv_size(_conv_size(int(height), 8, 4), 4, 2)
        w = _conv_size(_conv_size(int(width), 8, 4), 4, 2)
        if h < 1 or w < 1:
            raise ValueError(
                f"ShallowAtariStem: observation {self.observation_shape} is too small for "
                "conv8x8/4 then conv4x4/2 (needs H, W >= 20)"
            )
        self.conv0 = nn.Conv2d(int(in_channels), self.channels[0], kernel_size=8, stride=4)
        self.conv1 = nn.Conv2d(self.channels[0], self.channels[1], kernel_size=4, stride=2)
        self.feature_map_shape = (self.channels[1], h, w)
        self.flatten_size = self.channels[1] * h * w
        self.linear = nn.Linear(self.flatten_size, self.fc)
        self.output_size = self.fc
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Orthogonal weights with gain sqrt(2) (ReLU) and zero biases, the usual init of this Atari net in
        A2C/PPO code. PyTorch's default init shrinks each layer's output (gain ~ 1/sqrt(3)); on mostly dark
        Atari frames the features then had an RMS of ~0.02 against ~0.17-0.26 with this init (measured on
        Breakout frames), and the eLSTM's output behind them ~0.005 against ~0.05-0.08 (docs/results.md)."""
        for layer in (self.conv0, self.conv1, self.linear):
            nn.init.orthogonal_(layer.weight, math.sqrt(2.0))
            nn.init.zeros_(layer.bias)

    def encode(self, x: Tensor) -> Tensor:
        x = F.relu(self.conv1(F.relu(self.conv0(x)))).flatten(1)
        return F.relu(self.linear(x))


class MLPStem(Stem):
    """Vector observations: hidden layers Linear -> relu with sizes ``hidden``.

    Observations of shape (D,), or small images (C, H, W) which are flattened (uint8 scaled by 1/255):
    the fast choice for the built-in memory tasks. output_size = hidden[-1] (D if hidden is empty).
    """

    def __init__(self, in_features: int | Sequence[int], hidden: Sequence[int] = (256,)) -> None:
        super().__init__()
        self.kind = "mlp"
        shape = (int(in_features),) if isinstance(in_features, int) else tuple(int(s) for s in in_features)
        self.observation_shape = shape
        self.is_image = len(shape) == 3
        in_features = 1
        for s_ in shape:
            in_features *= s_
        hidden = tuple(int(h) for h in hidden)
        # metadata convention: hidden = (*channels, fc)
        self.channels = hidden[:-1]
        self.fc = hidden[-1] if hidden else None
        layers: list[nn.Module] = []
        d = int(in_features)
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        self.net = nn.Sequential(*layers)
        self.output_size = d

    def encode(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1))


class IdentityStem(Stem):
    """'none': passes observations through, flattened; output_size = prod(observation_shape).

    Vector observations (D,): floating input keeps its dtype, integer/bool input is cast to the default
    float dtype. Image observations (C, H, W) are flattened, uint8 pixels scaled by 1/255: the core sees
    the raw pixels (no stem, so no truncated stem gradient — the setting of the memory experiments).

    ``pool`` (images only): each channel first averaged over ``pool`` x ``pool`` blocks of pixels
    (``pooled``), so (C, H, W) enters as (C, ceil(H / pool), ceil(W / pool)); nothing is learned.
    """

    def __init__(self, in_features: int | Sequence[int], pool: int = 1) -> None:
        super().__init__()
        self.kind = "none"
        shape = (int(in_features),) if isinstance(in_features, int) else tuple(int(s) for s in in_features)
        self.observation_shape = shape
        self.is_image = len(shape) == 3
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise ValueError(f"stem 'none': pool must be a whole number >= 1, got {pool!r}")
        if pool > 1 and not self.is_image:
            raise ValueError(f"stem 'none': pool {pool} needs image observations (C, H, W), got {shape}; "
                             "set model.frame_pool=1")
        self.pool = pool
        self.channels = ()
        self.fc = None
        self.frame_shape = pooled_shape(shape, pool) if self.is_image else shape
        self.output_size = math.prod(self.frame_shape)

    def pooled(self, x: Tensor) -> Tensor:
        """Frames [N, C, H, W] -> [N, C, ceil(H / pool), ceil(W / pool)]: each block's mean (a block cut by
        the frame's edge: the mean of its part inside). uint8 frames stay uint8 (the mean rounded to the
        nearest level), so pooled frames are frames as an env could give them; floating ones keep their
        dtype. The identity with pool 1."""
        if self.pool == 1:
            return x
        y = F.avg_pool2d(x if x.dtype.is_floating_point else x.to(torch.float32), self.pool, ceil_mode=True)
        return y if x.dtype.is_floating_point else y.round_().to(x.dtype)

    def frames(self, x: Tensor) -> Tensor:
        """Image observations [*lead, C, H, W] as they enter: ``pooled``, [*lead, *frame_shape]."""
        x, lead = _split_lead(x, 3, self.observation_shape)
        return self.pooled(x).reshape(*lead, *self.frame_shape)

    def forward(self, x: Tensor) -> Tensor:
        x, lead = _split_lead(x, len(self.observation_shape), self.observation_shape)
        if self.is_image:
            x = self.pooled(x)
            x = _image_to_float(x, torch.get_default_dtype() if not x.dtype.is_floating_point else x.dtype)
        elif not x.dtype.is_floating_point:
            x = x.to(torch.get_default_dtype())
        return x.reshape(*lead, self.output_size)


def pooled_shape(shape: Sequence[int], pool: int) -> tuple[int, ...]:
    """(C, H, W) averaged over ``pool`` x ``pool`` blocks: (C, ceil(H / pool), ceil(W / pool))."""
    c, h, w = shape
    return (int(c), -(-int(h) // pool), -(-int(w) // pool))


def make_stem(kind: str, observation_shape: Sequence[int],
              channels: Sequence[int] | None = None, fc: int | None = 256, pool: int = 1) -> Stem:
    """Build a stem by name for observations of ``observation_shape`` (without batch dims).

    kind "impala" | "shallow": observation_shape = (C, H, W); channels default (16, 32, 32) /
        (16, 32); fc is the width of the final FC layer.
    kind "mlp": observation_shape = (D,); hidden layer sizes are (*channels, fc) (channels default
        ()), so the default is one 256-unit layer.
    kind "none": observation_shape = (D,) or (C, H, W); channels and fc are ignored; image frames are
        averaged over ``pool`` x ``pool`` blocks first (``IdentityStem``).
    The returned module has ``.output_size``; ``make_stem(**stem_metadata(stem))`` rebuilds it.
    """
    shape = tuple(int(s) for s in observation_shape)
    if kind not in STEMS:
        raise ValueError(f"unknown stem kind {kind!r}; choose one of {list(STEMS)}")
    if kind in IMAGE_STEMS and len(shape) != 3:
        raise ValueError(
            f"stem {kind!r} needs an image observation shape (C, H, W), got {shape}; "
            f"image stems: {list(IMAGE_STEMS)}, stems for 1-D observations: {list(VECTOR_STEMS)}"
        )
    if kind in VECTOR_STEMS and len(shape) not in (1, 3):
        raise ValueError(
            f"stem {kind!r} needs a 1-D observation shape (D,), got {shape}; "
            f"stems for 1-D observations: {list(VECTOR_STEMS)}, image stems (C, H, W): "
            f"{list(IMAGE_STEMS)}"
        )
    if kind in IMAGE_STEMS and fc is None:
        raise ValueError(f"stem {kind!r} needs an fc width, got fc=None")
    if kind == "impala":
        return ImpalaResNetStem(*shape, channels=(16, 32, 32) if channels is None else channels, fc=fc)
    if kind == "shallow":
        return ShallowAtariStem(*shape, channels=(16, 32) if channels is None else channels, fc=fc)
    if kind == "mlp":
        hidden = tuple(channels or ()) + (() if fc is None else (int(fc),))
        return MLPStem(shape, hidden=hidden)
    return IdentityStem(shape, pool=pool)


def stem_metadata(stem: nn.Module) -> dict:
    """What ``make_stem`` needs to rebuild ``stem``: {kind, observation_shape, channels, fc}.

    JSON-friendly (lists for the shapes); ``make_stem(**stem_metadata(stem))`` gives a stem with the
    same architecture, so a pretrained stem is exported as this dict plus its state_dict.
    """
    for attr in ("kind", "observation_shape", "channels", "fc"):
        if not hasattr(stem, attr):
            raise TypeError(f"stem_metadata: {type(stem).__name__} has no {attr!r} attribute")
    return {
        "kind": stem.kind,
        "observation_shape": list(stem.observation_shape),
        "channels": list(stem.channels),
        "fc": stem.fc,
    }
