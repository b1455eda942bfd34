"""A ninth long-credit task written the way a user would write one: what colour was the light the pointer shows?

WhatWasThere, a delayed cued recall of several items: RGB frames, channels last, ``(size, size, 3)`` uint8. The
first frame of an episode shows ``items`` squares side by side in a row across the middle of a black frame, each
in a colour drawn on its own from ``colours`` (red, green, blue, yellow, in that order; two squares may share a
colour). Then come ``span - 1`` black frames. Then the query frame: grey, with a white bar under one of the
squares' places, drawn uniformly; the squares are gone. The action taken at the query frame ends the episode and
pays 1 if it names the colour the square at that place had (action k: colour k), 0 otherwise; actions elsewhere
do nothing. Chance is 1 / ``colours``.

Unlike the eight tasks before it, the first frame holds more than one thing to keep, and which of them is asked
for is said only at the query: an agent that keeps k of the 3 squares is right on (k + (3 - k) / 4) / 3 of the
episodes (0.5, 0.75, 1 for k = 1, 2, 3 with 4 colours).

Written, as the others, before any run and not changed after:

    r2ac bench memory --tasks gym:examples.what_was_there:WhatWasThere --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/there150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

PALETTE = np.array(((230, 40, 40), (40, 220, 40), (50, 80, 240), (230, 220, 40)), np.uint8)
QUERY = 100  # the query frame's grey
POINTER = 255  # the pointer's white


class WhatWasThere(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, items: int = 3, colours: int = 4) -> None:
        if size < 8:
            raise ValueError(f"size must be >= 8, got {size}")
        if not 2 <= items <= size // 3:
            raise ValueError(f"items must be in 2..size/3 ({size // 3}) so that each square has room, got {items}")
        if not 2 <= colours <= len(PALETTE):
            raise ValueError(f"colours must be in 2..{len(PALETTE)}, got {colours}")
        if span < 1:
            raise ValueError(f"span must be >= 1 (the squares' frame comes before the query), got {span}")
        self.span, self.size, self.items, self.n_colours = int(span), int(size), int(items), int(colours)
        slot = self.size // self.items
        self.side = min(4, slot - 1)
        margin = (self.size - self.items * slot) // 2
        self.xs = tuple(margin + i * slot + (slot - self.side) // 2 for i in range(self.items))
        self.y = self.size // 2 - self.side // 2 - 1
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(self.n_colours)
        self.t = 0
        self.colours = (0,) * self.items  # the squares' colours, left to right
        self.cued = 0  # the place the pointer shows

    @property
    def answer(self) -> int:
        return self.colours[self.cued]

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        s, y = self.side, self.y
        if self.t == 0:
            for x, c in zip(self.xs, self.colours):
                frame[y:y + s, x:x + s] = PALETTE[c]
        elif self.t == self.span:
            frame[:] = QUERY
            x = self.xs[self.cued]
            frame[y + s + 1:y + s + 3, x:x + s] = POINTER
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.colours = tuple(int(c) for c in self.np_random.integers(self.n_colours, size=self.items))
        self.cued = int(self.np_random.integers(self.items))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
