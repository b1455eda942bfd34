"""A long-credit task written the way a user would write one: a plain Gymnasium env, outside r2ac.

ColourPatch: at step 0 a small coloured square (the cue, one of ``colours`` colours) sits at a random
place on a grey, grainy background. Then ``span`` frames of background follow; with ``distractors > 0``
each of them shows, with that probability, a square of a random colour (any of the cue colours) at a
random place, so the agent must keep the first square and not the latest. ``grain`` is the background's
per-pixel noise (uniform in [-grain, grain] around grey 128; 0 gives a flat grey), on every frame, or with
``grain_on="cue"`` on the cue's frame only, ``"between"`` on every frame but the cue's. Then the query frame (the
background with a white border) asks which colour the cue was: the action taken there ends the episode
and pays 1 if it names the cue's colour (action i = colour i), 0 otherwise. Actions elsewhere do
nothing. Observations are ``(size, size, 3)`` uint8 images, channels last, as most image envs give them.

Nothing of r2ac was tuned on it. Train it with quickstart's settings:

    r2ac train configs/quickstart.yaml env.id=gym:examples.colour_patch:ColourPatch "env.options={span: 150}"
    r2ac bench memory --tasks gym:examples.colour_patch:ColourPatch --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task env.options.span=150

(run from the repository root, so that ``examples`` can be imported; see docs/environments.md, "Your
own task").
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array([(220, 40, 40), (40, 180, 60), (50, 70, 230), (230, 200, 30), (180, 60, 200), (30, 200, 210)],
                   dtype=np.uint8)
BACKGROUND = 128
GRAIN = 24  # the background's per-pixel noise by default: uniform in [-grain, grain]
GRAIN_ON = ("all", "cue", "between")  # the frames with grain: every one, the cue's only, all but the cue's


class ColourPatch(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, colours: int = 4, size: int = 24, patch: int = 6,
                 distractors: float = 0.0, grain: int = GRAIN, grain_on: str = "all") -> None:
        if not 1 <= colours <= len(COLOURS):
            raise ValueError(f"colours must be in 1..{len(COLOURS)}, got {colours}")
        if not 1 <= patch <= size:
            raise ValueError(f"patch must be in 1..size ({size}), got {patch}")
        if not 0.0 <= distractors <= 1.0:
            raise ValueError(f"distractors is a probability in [0, 1], got {distractors}")
        if not 0 <= grain <= BACKGROUND:
            raise ValueError(f"grain must be in 0..{BACKGROUND}, got {grain}")
        self.span, self.colours, self.size, self.patch = int(span), int(colours), int(size), int(patch)
        if grain_on not in GRAIN_ON:
            raise ValueError(f"grain_on must be one of {GRAIN_ON}, got {grain_on!r}")
        self.grain, self.grain_on = int(grain), grain_on
        self.distractors = float(distractors)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(self.colours)
        self.t = 0
        self.cue = 0

    def _background(self) -> np.ndarray:
        if not self.grain or self.grain_on == ("between" if self.t == 0 else "cue"):
            return np.full((self.size, self.size, 3), BACKGROUND, np.uint8)
        grain = self.np_random.integers(-self.grain, self.grain + 1, (self.size, self.size, 3))
        return (BACKGROUND + grain).astype(np.uint8)

    def _with_square(self, frame: np.ndarray, colour: int) -> np.ndarray:
        y, x = self.np_random.integers(0, self.size - self.patch + 1, 2)
        frame[y:y + self.patch, x:x + self.patch] = COLOURS[colour]
        return frame

    def _frame(self) -> np.ndarray:
        frame = self._background()
        if self.t == 0:
            return self._with_square(frame, self.cue)
        if self.t == self.span + 1:  # the query
            frame[:2], frame[-2:], frame[:, :2], frame[:, -2:] = 255, 255, 255, 255
            return frame
        if self.distractors and self.np_random.random() < self.distractors:
            return self._with_square(frame, int(self.np_random.integers(self.colours)))
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.cue = int(self.np_random.integers(self.colours))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span + 1:
            return self._frame(), float(int(action) == self.cue), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
