"""A fifteenth long-credit task written the way a user would write one: the colour of the marked light.

MarkedLight: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a query.
On ``lights`` of the ``span`` frames (drawn at random, any of them, the first included) a light flashes: a
``light`` x ``light`` square of one of three colours (red, green, blue; each light's drawn on its own, so colours
can repeat) at a random place on a black frame. Exactly one of the lights, drawn at random among them (first,
last or any between), is marked: a white ring one pixel wide around its square. Every other frame is black. Then
a grey query frame asks for the colour of the marked light: the action taken there ends the episode and pays 1 if
it names that colour (0 red, 1 green, 2 blue), 0 otherwise; actions elsewhere do nothing. Chance is 1/3.

Written after ``which_turn.py``, before any run of it, to test r2ac's defaults on a memory that must be written on
one event picked out by a mark and then left alone while unmarked events of the same kind come and go: the lights
around the marked one are decoys, not noise. The earlier tasks either kept every event (a count, an order, the
side of most flashes) or the one event there was; the nearest, ``last_light.py``, writes over its memory at every
light. What an agent keeps shows in its score. One that keeps the first light's colour, or the last one's, is
right on 1/4 + 3/4 x 1/3 = 1/2 of the episodes with four lights (the marked one is that light on a quarter of
them, and a decoy has the marked colour on a third of the rest); one that keeps the colour most lights had, on
0.59 (ties broken at random). Only a memory written on the mark, and only there, gets near all of them.
``tools/marked_light_answers.py`` splits a run's answers by where among the lights the marked one came.
Quickstart's settings reached 0.9 at span 150 on 3/3 seeds in 4.1-5.1 minutes on 2 cores (1.6-2.0 M agent steps;
with 8 lights 3/3 in 5.4-9.2), at span 500 on 2/3 within 20 minutes (16.1 and 19.0); TBPTT stayed at chance
(docs/results.md, "The marked light"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.marked_light:MarkedLight "env.options={span: 150}" \\
        total_steps=3000000
    r2ac bench memory --tasks gym:examples.marked_light:MarkedLight --methods rtrl --seeds 0,1,2 --minutes 10 \\
        --steps 0 --out results/user_task/marked150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
RING = 255  # the mark: a white ring around the light's square
QUERY = 100  # the query frame's grey


class MarkedLight(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3, lights: int = 4) -> None:
        if lights < 1:
            raise ValueError(f"lights must be >= 1 (one of them is marked), got {lights}")
        if span < lights:
            raise ValueError(f"span must be >= lights ({lights}) to give each light a frame, got {span}")
        if not 1 <= light <= size - 2:
            raise ValueError(f"light must be in 1 .. size - 2 ({size - 2}) so that the ring fits, got {light}")
        self.span, self.size, self.light, self.lights = int(span), int(size), int(light), int(lights)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS))
        self.t = 0
        self.times: tuple = tuple(range(self.lights))  # the frames of the lights, in order
        self.colours: tuple = (0,) * self.lights  # their colours, in order
        self.marked = 0  # which light (its place among them) carries the mark

    @property
    def answer(self) -> int:
        """The right answer: the marked light's colour."""
        return self.colours[self.marked]

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:
            frame[:] = QUERY
        elif self.t in self.times:
            k = self.times.index(self.t)
            # the ring's box is placed alike for marked and unmarked lights, so where a light is says nothing
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light - 1, 2))
            if k == self.marked:
                frame[y:y + self.light + 2, x:x + self.light + 2] = RING
            frame[y + 1:y + 1 + self.light, x + 1:x + 1 + self.light] = COLOURS[self.colours[k]]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.times = tuple(sorted(int(s) for s in self.np_random.choice(self.span, self.lights, replace=False)))
        self.colours = tuple(int(c) for c in self.np_random.integers(0, len(COLOURS), self.lights))
        self.marked = int(self.np_random.integers(self.lights))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
