"""An eighth long-credit task written the way a user would write one: was the second light where the first one was?

SamePlace, a delayed match-to-sample task: RGB frames, channels last, ``(size, size, 3)`` uint8. The first frame
of an episode shows the sample, a ``spot`` x ``spot`` square at a random place inside one of the frame's four
quadrants, on black. Then come ``span - 1`` black frames. Then the test frame: a second spot, on a grey
background, in the sample's quadrant with probability 1/2 and otherwise in one of the other three (each 1/6),
again at a random place inside its quadrant. The action taken at the test frame ends the episode and pays 1 if
it says whether the two were in the same quadrant (0 same, 1 not), 0 otherwise; actions elsewhere do nothing.
Chance is 1/2. Each spot's colour is drawn on its own from red, green, blue and white, so colour says nothing.

Unlike the seven tasks before it, the query does not ask for what was kept: the answer is a comparison of what
was kept with what is seen, made at the test frame. Neither frame alone says anything about the answer.

Written, as the others, before any run and not changed after:

    r2ac bench memory --tasks gym:examples.same_place:SamePlace --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/same150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 220, 40), (50, 80, 240), (240, 240, 240)), np.uint8)
TEST = 100  # the test frame's grey


class SamePlace(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, spot: int = 3) -> None:
        if size < 4 or size % 2:
            raise ValueError(f"size must be an even number >= 4, got {size}")
        if not 1 <= spot <= size // 2:
            raise ValueError(f"spot must be in 1..size/2 ({size // 2}) to fit in a quadrant, got {spot}")
        if span < 1:
            raise ValueError(f"span must be >= 1 (the sample's frame comes before the test), got {span}")
        self.span, self.size, self.spot = int(span), int(size), int(spot)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.quadrants = (0, 0)  # the sample's, the test's
        self.places = ((0, 0), (0, 0))
        self.colours = (0, 0)

    @property
    def same(self) -> bool:
        return self.quadrants[0] == self.quadrants[1]

    def _place(self, quadrant: int) -> tuple:
        half = self.size // 2
        y, x = self.np_random.integers(0, half - self.spot + 1, 2)
        return int(y) + half * (quadrant // 2), int(x) + half * (quadrant % 2)

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:
            frame[:] = TEST
        if self.t in (0, self.span):
            which = int(self.t == self.span)
            y, x = self.places[which]
            frame[y:y + self.spot, x:x + self.spot] = COLOURS[self.colours[which]]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        sample = int(self.np_random.integers(4))
        if self.np_random.random() < 0.5:
            test = sample
        else:
            test = (sample + 1 + int(self.np_random.integers(3))) % 4
        self.quadrants = (sample, test)
        self.places = (self._place(sample), self._place(test))
        self.colours = tuple(int(c) for c in self.np_random.integers(len(COLOURS), size=2))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == int(not self.same)), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
