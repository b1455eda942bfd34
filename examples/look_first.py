"""An eighteenth long-credit task written the way a user would write one: a cue the agent has to go and look at.

LookFirst: RGB frames, channels last, ``(size, size, 3)`` uint8, four actions: 0, 1 and 2 name a colour (red,
green, blue), 3 is "look". Each episode has one colour, drawn at random, and it is shown only to an agent that
asks. The first ``window`` frames are dim grey: the look window. The first "look" taken on one of them shows, on
the next frame, a ``light`` x ``light`` square of the episode's colour at a random place on black; a look after
the first one, or after the window, does nothing, and an agent that never looks is never shown the colour. Then
come black frames up to frame ``span``, a grey query: the action taken there ends the episode and pays 1 if it
names the colour, 0 otherwise; actions elsewhere do nothing. Chance is 1/3.

Written after ``which_rule.py``, before any run of it, to test r2ac's defaults on a memory the agent has to fill
itself. In every earlier task the cue came whatever the agent did; here what reaches the query depends on an
action taken ``span`` frames before it. Looking pays nothing when it is taken: its worth shows only at the query,
and only to an agent that keeps what it saw, so the credit for the look travels through the memory it fills, and
the values at the window have to know whether the agent looked (from the colour kept) to pass that credit back.
An agent that keeps the colour but looks only as often as chance has it (once in the three frames of the default
window with probability 1 - (3/4)^3) is right on 0.72 of the episodes; 0.9 needs it to look on 85% of them.
``tools/look_first_answers.py`` splits a run's answers by whether, and when, it looked. Quickstart's settings
reached 0.9 at span 150 on 3/3 seeds in 1.1-1.4 minutes on 2 cores; at span 500 on 1/2 within 20 (the other kept the
colour and looked at chance: a look's worth reaches it as 0.99^500 of the reward), and with
``learner.discount=0.999`` (quickstart's since 2026-12-03) on 2/2 in 3.6-3.9; TBPTT with the same M stayed near
chance (docs/results.md, "Look first").

    r2ac train configs/quickstart.yaml env.id=gym:examples.look_first:LookFirst "env.options={span: 150}" \\
        total_steps=4000000
    r2ac bench memory --tasks gym:examples.look_first:LookFirst --methods rtrl --seeds 0,1,2 --minutes 10 \\
        --steps 0 --out results/user_task/look150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
LOOK = len(COLOURS)  # the action that asks to be shown the colour
WINDOW = 60  # the look window's dim grey
QUERY = 100  # the query frame's grey


class LookFirst(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 4, window: int = 3) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1 (the frames on which a look shows the colour), got {window}")
        if span <= window:
            raise ValueError(f"span must be > window ({window}) so that the colour, shown on the frame after a "
                             f"look, comes before the query; got {span}")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}) so that the square fits on the frame, got {light}")
        self.span, self.size, self.light, self.window = int(span), int(size), int(light), int(window)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS) + 1)
        self.t = 0
        self.colour = 0  # the episode's colour, the right answer
        self.looked_at = -1  # the frame on which the agent first looked (-1: it did not)
        self.corner = (0, 0)  # where the square shows

    @property
    def answer(self) -> int:
        """The right answer: the episode's colour (0 red, 1 green, 2 blue)."""
        return self.colour

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:
            frame[:] = QUERY
        elif self.looked_at >= 0 and self.t == self.looked_at + 1:  # the colour, on the frame after the look
            y, x = self.corner
            frame[y:y + self.light, x:x + self.light] = COLOURS[self.colour]
        elif self.t < self.window:
            frame[:] = WINDOW
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.looked_at = 0, -1
        self.colour = int(self.np_random.integers(len(COLOURS)))
        self.corner = tuple(int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        if int(action) == LOOK and self.t < self.window and self.looked_at < 0:
            self.looked_at = self.t
        self.t += 1
        return self._frame(), 0.0, False, False, {}
