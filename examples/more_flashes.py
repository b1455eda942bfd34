"""An eleventh long-credit task written the way a user would write one: which side flashed more often.

MoreFlashes: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a
query. On ``k`` of the ``span`` frames (k drawn from the odd numbers 1, 3, .. ``max_count``, the frames drawn at
random from all of them, the first and the last included) a white ``light`` x ``light`` square flashes at a
random place in the left half of a black frame or in its right half, each flash's half drawn on its own with
even odds. Every other frame is black. Then the query frame (all of it grey) asks on which side more lights
flashed: the action taken there ends the episode and pays 1 if it names that side (0 left, 1 right), 0
otherwise; actions elsewhere do nothing. ``k`` is odd, so there is never a tie. Chance is 1/2.

Written after ``last_light.py``, before any run on it, to test r2ac's defaults on a kind of memory none of them
was chosen on: evidence accumulated over the whole episode, as in the "clicks" tasks of neuroscience. No one
frame holds the answer and no flash is marked; each one moves a running difference (right minus left) by one,
and a flash on the first frame has to count at the query exactly as much as one on the frame before it. An agent
that keeps only the side of the last flash (or of the first) is right on every episode with one flash, and on
about 3/4 of those with three. Quickstart's settings learned it at span 150 in 0.32-0.40 M agent steps, half a
minute on 2 cores, at span 500 in 1.12-1.37 M and at span 1000 in 3.15-3.46 M, 4.6-5.1 minutes; TBPTT with the
same M learned it at span 150 in 5.8x the steps and reached 0.70-0.75 at 500 and 1000 (docs/results.md, "Which
side flashed more").

``window`` (added after the first runs; its default, ``span``, is the task as they ran it) puts every flash on the
first ``window`` frames, at least ``span - window`` frames before the query.

    r2ac train configs/quickstart.yaml env.id=gym:examples.more_flashes:MoreFlashes "env.options={span: 150}" \
        total_steps=5000000
    r2ac bench memory --tasks gym:examples.more_flashes:MoreFlashes --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/more150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

LIGHT = 255  # the flashes' white
QUERY = 100  # the query frame's grey


class MoreFlashes(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3, max_count: int = 5,
                 window: int | None = None) -> None:
        if max_count < 1 or max_count % 2 == 0:
            raise ValueError(f"max_count must be an odd number >= 1 (flashes per episode: 1, 3, .. max_count, "
                             f"so that one side always has more), got {max_count}")
        if not max_count <= span:
            raise ValueError(f"span must be >= max_count ({max_count}) so that every flash has a frame of its own, "
                             f"got {span} (give a longer span or a smaller max_count)")
        window = span if window is None else int(window)
        if not max_count <= window <= span:
            raise ValueError(f"window must be in max_count ({max_count}) .. span ({span}): the flashes come on the "
                             f"first window frames, got {window}")
        if not 1 <= light <= size // 2:
            raise ValueError(f"light must be in 1 .. size // 2 ({size // 2}) so that a flash fits in one half of "
                             f"the frame, got {light}")
        self.span, self.size, self.light, self.max_count = int(span), int(size), int(light), int(max_count)
        self.window = window
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.flashes: dict[int, int] = {}  # frame -> side of the flash shown there (0 left, 1 right)

    @property
    def answer(self) -> int:
        """The side (0 left, 1 right) on which more lights flashed this episode."""
        return int(2 * sum(self.flashes.values()) > len(self.flashes))

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t in self.flashes:
            half = self.size // 2
            y = int(self.np_random.integers(0, self.size - self.light + 1))
            x = int(self.np_random.integers(0, half - self.light + 1)) + half * self.flashes[self.t]
            frame[y:y + self.light, x:x + self.light] = LIGHT
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        count = 2 * int(self.np_random.integers(0, (self.max_count + 1) // 2)) + 1
        times = self.np_random.choice(self.window, count, replace=False)
        self.flashes = {int(t): int(self.np_random.integers(2)) for t in times}
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
