"""A twelfth long-credit task written the way a user would write one: how long ago the light flashed.

HowLongAgo: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a query.
On one of the ``span`` frames, drawn at random, a white ``light`` x ``light`` square flashes at a random place
on a black frame; every other frame is black. The flash's frame is drawn from the first half of the episode or
from its second half with even odds (with ``gap`` > 0, never on the ``gap`` frames in the middle). Then the query
frame (all of it grey) asks when the flash came: the action taken there ends the episode and pays 1 if it names
the half (0 early, 1 late), 0 otherwise; actions elsewhere do nothing. Chance is 1/2.

Written after ``more_flashes.py``, before any run on it, to test r2ac's defaults on a kind of memory none of them
was chosen on: a time, not a thing. Every flash looks alike; what has to reach the query is how many frames have
passed since it, and no frame shows that. The agent has to make the time itself, from what its memory does
between the flash and the query (a trace that fades at the right pace, or a clock it reads when the flash
comes), and a flash near the middle of the episode has to be told apart from one a few frames to the other side
of it. With ``gap`` = 0 (the default) nothing keeps flashes away from the middle. Quickstart's settings learned it
at span 150 in 0.30-0.36 M agent steps, half a minute on 2 cores, at span 1000 in 1.44-2.74 M (2.6-4.6 minutes) and
at span 3000 in 4.6-6.3 M (7.9-11.2 minutes); TBPTT with the same M learned it at span 150 in 4.9x and 10x the
steps (2 seeds), not at 500 or 1000 in 10 minutes (docs/results.md, "How long ago the light flashed").

    r2ac train configs/quickstart.yaml env.id=gym:examples.how_long_ago:HowLongAgo "env.options={span: 150}" \
        total_steps=5000000
    r2ac bench memory --tasks gym:examples.how_long_ago:HowLongAgo --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/ago150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

LIGHT = 255  # the flash's white
QUERY = 100  # the query frame's grey


class HowLongAgo(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3, gap: int = 0) -> None:
        if span < 2:
            raise ValueError(f"span must be >= 2 so that each half of the episode has a frame, got {span}")
        if not 0 <= gap <= span - 2:
            raise ValueError(f"gap must be in 0 .. span - 2 ({span - 2}): the frames in the middle of the episode "
                             f"on which no flash comes, leaving at least one frame in each half; got {gap}")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}) so that the flash fits on the frame, got {light}")
        self.span, self.size, self.light, self.gap = int(span), int(size), int(light), int(gap)
        self.half = (self.span - self.gap) // 2  # frames on which an early (or a late) flash may come
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.flash = 0  # the frame of the flash

    @property
    def answer(self) -> int:
        """0 if the flash came in the first half of the episode, 1 if in the second."""
        return int(self.flash >= self.span - self.half)

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t == self.flash:
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
            frame[y:y + self.light, x:x + self.light] = LIGHT
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        late = int(self.np_random.integers(2))
        self.flash = int(self.np_random.integers(0, self.half)) + late * (self.span - self.half)
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
