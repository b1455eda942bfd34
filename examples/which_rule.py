"""A seventeenth long-credit task written the way a user would write one: the rule first, then what to read.

WhichRule: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a query.
The first frame gives the rule: all yellow ("name the colour") or all magenta ("name the place"). The next
``span - 1`` frames are black. Then the query frame, grey, shows one ``light`` x ``light`` square of one of three
colours (red, green, blue) in one of three places (the left, middle or right third of the frame, at a random
height), never the colour whose number is the place's (red on the left, green in the middle, blue on the right
never come up), so that the two rules always ask for different answers. The action taken at the query ends the
episode and pays 1 if it names what the rule asks for (the colour: 0 red, 1 green, 2 blue; or the place: 0 left,
1 middle, 2 right), 0 otherwise; actions elsewhere do nothing. Chance is 1/3; an agent that keeps no rule and
reads the query well is right on half of the episodes at most (always the colour, or always the place).

Written after ``first_guess.py``, before any run of it, to test r2ac's defaults on a memory of a new use: in every
earlier task the memory held the answer, or a thing to compare with the query; here it holds one bit that says
which of two things the query shows is the answer (a delayed context-dependent decision). What an agent keeps shows
in its score split by rule: ``tools/which_rule_answers.py``. Quickstart's settings reached 0.9 on 3/3 seeds at span
150 in 0.9-1.7 minutes on 2 cores, at 500 in 2.7-8.4 and at 1000 (100x M) in 6.9-10.9, at 3000 (300x M) on 2/2 seeds
given an hour in 15.3 and 39.5 (a third, given 30, reached 0.83); TBPTT stayed at the ceiling of an agent without the
rule (docs/results.md, "The rule first", "The rule first at 300x M").

    r2ac train configs/quickstart.yaml env.id=gym:examples.which_rule:WhichRule "env.options={span: 150}" \\
        total_steps=4000000
    r2ac bench memory --tasks gym:examples.which_rule:WhichRule --seeds 0,1,2 --minutes 10 --steps 0 \\
        --methods rtrl --out results/user_task/rule150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
RULES = np.array(((230, 210, 40), (200, 60, 200)), np.uint8)  # yellow: name the colour; magenta: name the place
QUERY = 100  # the query frame's grey


class WhichRule(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3) -> None:
        if span < 1:
            raise ValueError(f"span must be >= 1 (the rule's frame), got {span}")
        if not 1 <= light <= size // 3:
            raise ValueError(f"light must be in 1 .. size // 3 ({size // 3}) so that a square fits in each third "
                             f"of the frame, got {light}")
        self.span, self.size, self.light = int(span), int(size), int(light)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS))
        self.t = 0
        self.rule = 0  # 0: name the colour, 1: name the place
        self.colour, self.place = 1, 0  # what the query shows
        self.height = 0  # the square's top row at the query

    @property
    def answer(self) -> int:
        """The right answer: the query's colour under rule 0, its place under rule 1."""
        return self.place if self.rule else self.colour

    def left(self, place: int) -> int:
        """The leftmost column of a square in ``place`` (0 left, 1 middle, 2 right): centred in its third."""
        third = self.size // 3
        return place * third + (third - self.light) // 2

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query: one square on grey
            frame[:] = QUERY
            x = self.left(self.place)
            frame[self.height:self.height + self.light, x:x + self.light] = COLOURS[self.colour]
        elif self.t == 0:
            frame[:] = RULES[self.rule]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.rule = int(self.np_random.integers(2))
        self.place = int(self.np_random.integers(3))
        self.colour = (self.place + 1 + int(self.np_random.integers(2))) % 3  # any colour but the place's number
        self.height = int(self.np_random.integers(0, self.size - self.light + 1))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.answer), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
