"""A third long-credit task written the way a user would write one: where a light was, not what colour.

WhereWasIt: grey-scale frames, 2-D arrays ``(size, size)`` of uint8 as a camera without colour gives them. At
step 0 a bright blob (``blob`` x ``blob`` pixels at 255) lights up at a random place inside one of the frame's
four quadrants, on a dark, noisy background (40 plus uniform noise in [-noise, noise] per pixel, every frame).
Then ``span`` frames of background follow; with ``distractors > 0`` each of them shows, with that probability,
a blob at a random place in a random quadrant, so the agent must keep the first and not the latest. Then the
query frame (the background with the two midlines lit, splitting it into its quadrants) asks where the first
blob was: the action taken there ends the episode and pays 1 if it names the blob's quadrant (0 top left,
1 top right, 2 bottom left, 3 bottom right), 0 otherwise; actions elsewhere do nothing. The blob looks the
same in every quadrant, so only where it lit up tells the answer.

Written after ``colour_patch.py`` to test r2ac's defaults on a task none of them was chosen on. It takes
1.5-1.7 M agent steps at span 150 (docs/results.md, "Two more tasks of a user's own"), more than quickstart's
1 M-step budget, so give it one. With each channel's centroid as an input (``model.frame_centroids: auto``, the
default from 2026-11-30) it took 0.54-0.61 M ("Where an object is, as two numbers"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.where_was_it:WhereWasIt "env.options={span: 150}" \
        total_steps=4000000
    r2ac bench memory --tasks gym:examples.where_was_it:WhereWasIt --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/where150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

DARK = 40  # the background's level
LIGHT = 255  # the blob's
MIDLINES = 200  # the query's lines


class WhereWasIt(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 32, blob: int = 4, noise: int = 16,
                 distractors: float = 0.0) -> None:
        if size < 4 or size % 2:
            raise ValueError(f"size must be an even number >= 4, got {size}")
        if not 1 <= blob <= size // 2:
            raise ValueError(f"blob must be in 1..size/2 ({size // 2}) to fit in a quadrant, got {blob}")
        if not 0 <= noise <= DARK:
            raise ValueError(f"noise must be in 0..{DARK}, got {noise}")
        if not 0.0 <= distractors <= 1.0:
            raise ValueError(f"distractors is a probability in [0, 1], got {distractors}")
        if span < 0:
            raise ValueError(f"span must be >= 0, got {span}")
        self.span, self.size, self.blob, self.noise = int(span), int(size), int(blob), int(noise)
        self.distractors = float(distractors)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.t = 0
        self.quadrant = 0

    def _background(self) -> np.ndarray:
        if not self.noise:
            return np.full((self.size, self.size), DARK, np.uint8)
        noise = self.np_random.integers(-self.noise, self.noise + 1, (self.size, self.size))
        return (DARK + noise).astype(np.uint8)

    def _with_blob(self, frame: np.ndarray, quadrant: int) -> np.ndarray:
        half = self.size // 2
        y, x = self.np_random.integers(0, half - self.blob + 1, 2)
        y, x = y + half * (quadrant // 2), x + half * (quadrant % 2)
        frame[y:y + self.blob, x:x + self.blob] = LIGHT
        return frame

    def _frame(self) -> np.ndarray:
        frame = self._background()
        if self.t == 0:
            return self._with_blob(frame, self.quadrant)
        if self.t == self.span + 1:  # the query
            half = self.size // 2
            frame[half - 1:half + 1], frame[:, half - 1:half + 1] = MIDLINES, MIDLINES
            return frame
        if self.distractors and self.np_random.random() < self.distractors:
            return self._with_blob(frame, int(self.np_random.integers(4)))
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.quadrant = int(self.np_random.integers(4))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span + 1:
            return self._frame(), float(int(action) == self.quadrant), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
