"""A seventh long-credit task written the way a user would write one: where a spark was, at a time nothing marks.

SparkQuadrant: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` black frames and then
a query. On one of the ``span`` frames, drawn at random (the first included), a spark flashes: a ``spark`` x
``spark`` square at a random place inside one of the frame's four quadrants, in a colour drawn for the episode
from red, green, blue and white. Then the query frame (all frame grey) asks which quadrant the spark was in: the
action taken there ends the episode and pays 1 if it names the quadrant (0 top left, 1 top right, 2 bottom left,
3 bottom right), 0 otherwise; actions elsewhere do nothing. Chance is 1/4. The colour says nothing, and nothing
marks the spark's frame but the spark: the agent has to write a place into memory when it sees one, at any step,
and keep it up to ``span`` steps.

Written, as the others, before any run and not changed after: it joins where_was_it.py's place (shown on the
first frame there) to count_flashes.py's unmarked time (docs/results.md, "Where an object is, as two numbers"):

    r2ac bench memory --tasks gym:examples.spark_quadrant:SparkQuadrant --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/spark150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 220, 40), (50, 80, 240), (240, 240, 240)), np.uint8)
QUERY = 100  # the query frame's grey


class SparkQuadrant(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, spark: int = 2) -> None:
        if size < 4 or size % 2:
            raise ValueError(f"size must be an even number >= 4, got {size}")
        if not 1 <= spark <= size // 2:
            raise ValueError(f"spark must be in 1..size/2 ({size // 2}) to fit in a quadrant, got {spark}")
        if span < 1:
            raise ValueError(f"span must be >= 1 (the spark needs a frame), got {span}")
        self.span, self.size, self.spark = int(span), int(size), int(spark)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.t = 0
        self.when = 0
        self.quadrant = 0
        self.place = (0, 0)
        self.colour = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t == self.when:
            y, x = self.place
            frame[y:y + self.spark, x:x + self.spark] = COLOURS[self.colour]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.when = int(self.np_random.integers(self.span))
        self.quadrant = int(self.np_random.integers(4))
        self.colour = int(self.np_random.integers(len(COLOURS)))
        half = self.size // 2
        y, x = self.np_random.integers(0, half - self.spark + 1, 2)
        self.place = (int(y) + half * (self.quadrant // 2), int(x) + half * (self.quadrant % 2))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.quadrant), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
