"""A fourteenth long-credit task written the way a user would write one: which turn a colour took.

WhichTurn: RGB frames, channels last, ``(size, size, 3)`` uint8. An episode is ``span`` frames and then a query.
On three of the ``span`` frames (drawn at random, any of them, the first included) a light flashes: a ``light`` x
``light`` square at a random place on a black frame. The three lights have the three colours (red, green, blue)
in a random order. Every other frame is black. Then the query frame, grey, shows one of the three colours (drawn
at random) as a ``light`` x ``light`` square at its centre, and asks which turn that colour took: the action taken
there ends the episode and pays 1 if it names the turn (0 first, 1 second, 2 third), 0 otherwise; actions
elsewhere do nothing. Chance is 1/3.

Written after ``odd_or_even.py``, before any run of it, to test r2ac's defaults on a memory that binds what was
seen to when, in order: none of the earlier tasks asks for a position in a sequence. What an agent keeps shows in
its score. One that keeps only the first colour (``which_first.py``'s memory) answers 2/3 of the queries: it
knows the first and guesses between the other two. One that keeps the first and the last colour
(``last_light.py``'s memory beside it) answers all of them, the second by elimination. One that keeps which
colours it saw, and not their order, is at chance. ``tools/which_turn_answers.py`` splits a run's answers by the
turn asked for. Quickstart's settings reached 0.9 at span 150 on one seed of three within 10 minutes on 2 cores and
on two within 30 (9.0 and 12.3 minutes, 3.5 and 4.5 M agent steps), at span 500 on none within 20 and one of two
within 25; they learn the last colour first, then the first, and the middle turn by elimination (docs/results.md,
"Which turn a colour took"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.which_turn:WhichTurn "env.options={span: 150}" \
        total_steps=6000000
    r2ac bench memory --tasks gym:examples.which_turn:WhichTurn --seeds 0,1,2 --minutes 10 --steps 0 \\
        --out results/user_task/turn150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

COLOURS = np.array(((230, 40, 40), (40, 200, 60), (50, 90, 240)), np.uint8)  # red, green, blue
QUERY = 100  # the query frame's grey


class WhichTurn(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, light: int = 3) -> None:
        if span < 3:
            raise ValueError(f"span must be >= 3 so that the three lights fit, got {span}")
        if not 1 <= light <= size:
            raise ValueError(f"light must be in 1 .. size ({size}), got {light}")
        self.span, self.size, self.light = int(span), int(size), int(light)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(COLOURS))
        self.t = 0
        self.times = (0, 1, 2)  # the frames of the three lights, in order
        self.order = (0, 1, 2)  # their colours, in order
        self.asked = 0  # the colour the query shows

    @property
    def turn(self) -> int:
        """The right answer: the turn (0, 1, 2) the asked colour took."""
        return self.order.index(self.asked)

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == self.span:  # the query: the asked colour at the centre of a grey frame
            frame[:] = QUERY
            top = (self.size - self.light) // 2
            frame[top:top + self.light, top:top + self.light] = COLOURS[self.asked]
        elif self.t in self.times:
            y, x = (int(v) for v in self.np_random.integers(0, self.size - self.light + 1, 2))
            frame[y:y + self.light, x:x + self.light] = COLOURS[self.order[self.times.index(self.t)]]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.times = tuple(sorted(int(s) for s in self.np_random.choice(self.span, 3, replace=False)))
        self.order = tuple(int(c) for c in self.np_random.permutation(len(COLOURS)))
        self.asked = int(self.np_random.integers(len(COLOURS)))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span:
            return self._frame(), float(int(action) == self.turn), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
