"""A sixth long-credit task written the way a user would write one: which of two lights came first.

WhichFirst: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a
query. On two of the ``span`` frames (drawn at random, any of them, the first included) a light flashes: a
``light`` x ``light`` square at a random place on a black frame, in one of three colours (red, green, blue); the
two lights have different colours, drawn at random. Every other frame is black. Then the query frame (all frame
grey) asks which colour came first: the action taken there ends the episode and pays 1 if it names the first
light's colour (0 red, 1 green, 2 blue), 0 otherwise; actions elsewhere do nothing. Chance is 1/3; an agent that
keeps which colours it saw but not their order gets 1/2.

Written after ``count_flashes.py`` to test r2ac's defaults on a kind of memory none of them was chosen on: an
order. The agent has to write the first light into memory and then keep it against the second, which looks
just like it and comes at a time nothing marks, up to ``span`` steps before the query. Quickstart's settings
learned it at span 150 in 1.56-2.65 M agent steps, 3.2-5.4 minutes on 2 cores, and at span 500 in 4.51-7.75 M,
9.3-15.2 minutes (docs/results.md, "Which light came first"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.which_first:WhichFirst "env.options={span: 150}" \
        total_steps=5000000
    r2ac bench memory --tasks gym:examples.which_first:WhichFirst --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/first150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
QUERY = 100  # the query frame's grey


class WhichFirst(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3) -> None:
        if span < 2:
            raise ValueError(f"span must be >= 2 so that both lights fit, got {span}")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}), got {light}")
        self.span, self.size, self.light = int(span), int(size), int(light)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS))
        self.t = 0
        self.times = (0, 1)  # the frames of the first and the second light
        self.colours = (0, 1)  # their colours

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t in self.times:
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
            frame[y:y + self.light, x:x + self.light] = COLOURS[self.colours[self.times.index(self.t)]]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.times = tuple(sorted(int(s) for s in self.np_random.choice(self.span, 2, replace=False)))
        self.colours = tuple(int(c) for c in self.np_random.choice(len(COLOURS), 2, replace=False))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.colours[0]), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
