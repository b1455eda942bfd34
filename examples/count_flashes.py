"""A fifth long-credit task written the way a user would write one: how many times a light flashed.

CountFlashes: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a
query. On ``k`` of the ``span`` frames (k drawn from 1 .. ``max_count``, the frames drawn at random, any of them,
the first included) a light flashes: a ``light`` x ``light`` square of one colour (the same in every episode) at
a random place on a black frame; every other frame is black. Then the query frame (all frame grey) asks how many
flashes there were: the action taken there ends the episode and pays 1 if it is k - 1, 0 otherwise; actions
elsewhere do nothing. No single frame holds the answer, and no frame is special: the agent has to count, and
keep the count from the first flash (up to ``span`` steps before the query) to the end.

Written after ``which_way.py`` to test r2ac's defaults on a kind of memory none of them was chosen on: a
count of events at unmarked times, not one cue at the episode's start. Quickstart's settings learned it at span
150 in 0.85-1.11 M agent steps, 1.7-2.2 minutes on 2 cores, more than quickstart's 1 M-step budget leaves to spare
(docs/results.md, "Counting flashes: a fifth task of a user's own"). At span 500 two seeds took 2.9 and 4.3 M;
with ``total_steps=8000000`` (the learning rate decays to 0 there) they held the count, above 0.9 after first
reaching 0.95, where a constant rate let them fall back to 0.76 and 0.85:

    r2ac train configs/quickstart.yaml env.id=gym:examples.count_flashes:CountFlashes "env.options={span: 150}" \
        total_steps=3000000
    r2ac bench memory --tasks gym:examples.count_flashes:CountFlashes --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/count150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

LIGHT = np.array((40, 220, 230), np.uint8)  # cyan
QUERY = 100  # the query frame's grey


class CountFlashes(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3, max_count: int = 3) -> None:
        if max_count < 2:
            raise ValueError(f"max_count must be >= 2 (the answers are 1 .. max_count), got {max_count}")
        if span < max_count:
            raise ValueError(f"span must be >= max_count ({max_count}) so that every count fits, got {span}")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}), got {light}")
        self.span, self.size, self.light, self.max_count = int(span), int(size), int(light), int(max_count)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(self.max_count)
        self.t = 0
        self.count = 1
        self.flashes: set[int] = set()

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t in self.flashes:
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
            frame[y:y + self.light, x:x + self.light] = LIGHT
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.count = int(self.np_random.integers(1, self.max_count + 1))
        self.flashes = {int(s) for s in self.np_random.choice(self.span, self.count, replace=False)}
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.count - 1), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
