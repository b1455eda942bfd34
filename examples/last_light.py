"""A tenth long-credit task written the way a user would write one: the colour of the last of a few lights.

LastLight: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a
query. On ``k`` of the first ``window`` frames (k drawn from 1 .. ``max_count``, the frames drawn at random, the
first included; ``window`` is ``span // 2`` unless given) a light flashes: a ``light`` x ``light`` square at a
random place on a black frame, in one of three colours (red, green, blue), each light's colour drawn at random
but never the colour of the light before it. Every other frame is black. Then the query frame (all frame grey)
asks which colour the last light had: the action taken there ends the episode and pays 1 if it names it (0 red,
1 green, 2 blue), 0 otherwise; actions elsewhere do nothing. Chance is 1/3.

Written after ``what_was_there.py``, before any run on it, to test r2ac's defaults on a kind of memory none of
them was chosen on: one that has to be overwritten. Every earlier task asks for something shown once, or for the
first of two lights; here each light replaces the one before it, so the agent has to write over what it holds
at a time nothing marks, and then keep the last one for at least ``span - window`` frames. An agent that keeps
the first light is right only when there was one light, or when the first and the last share a colour.
Quickstart's settings learned it at span 150 in 0.66-0.73 M agent steps, about a minute on 2 cores, at span 500
in 1.83-2.38 M and at span 1000 in 4.01-4.99 M, 6.3-9.4 minutes; TBPTT with the same M stayed at chance
(docs/results.md, "The last of a few lights"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.last_light:LastLight "env.options={span: 150}" \
        total_steps=5000000
    r2ac bench memory --tasks gym:examples.last_light:LastLight --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/last150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
QUERY = 100  # the query frame's grey


class LastLight(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3, max_count: int = 3,
                 window: int | None = None) -> None:
        if max_count < 1:
            raise ValueError(f"max_count must be >= 1 (lights per episode: 1 .. max_count), got {max_count}")
        window = span // 2 if window is None else int(window)
        if not max_count <= window <= span:
            raise ValueError(f"window must be in max_count ({max_count}) .. span ({span}) so that every light fits "
                             f"before the query, got {window} (give a longer span or a smaller max_count)")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}), got {light}")
        self.span, self.size, self.light = int(span), int(size), int(light)
        self.max_count, self.window = int(max_count), window
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS))
        self.t = 0
        self.lights: dict[int, int] = {}  # frame -> colour of the light shown there

    @property
    def answer(self) -> int:
        """The colour of the episode's last light."""
        return self.lights[max(self.lights)]

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query
            frame[:] = QUERY
        elif self.t in self.lights:
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
            frame[y:y + self.light, x:x + self.light] = COLOURS[self.lights[self.t]]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        count = int(self.np_random.integers(1, self.max_count + 1))
        times = sorted(int(s) for s in self.np_random.choice(self.window, count, replace=False))
        colour = int(self.np_random.integers(len(COLOURS)))
        self.lights = {}
        for when in times:
            self.lights[when] = colour
            colour = (colour + int(self.np_random.integers(1, len(COLOURS)))) % len(COLOURS)  # never the same twice
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
