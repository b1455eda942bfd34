"""A sixteenth long-credit task written the way a user would write one: a first guess, a hint, and a second guess.

FirstGuess: RGB frames, channels last, ``(size, size, 3)`` uint8, three actions (three doors, 0, 1 and 2). One of
the doors is right, drawn at random for each episode. The first frame is light grey: the action taken there is the
agent's first guess, which pays nothing. The second frame is a hint, one colour over the whole frame, that tells
where the right door lies *from the first guess*: green if the guess was right, red if the right door is the next
one (guess + 1, counted round: after door 2 comes door 0), blue if it is the one after (guess + 2, round). Then
come black frames up to frame ``span``, a grey query: the action taken there ends the episode and pays 1 if it
names the right door, 0 otherwise; actions elsewhere do nothing. Chance is 1/3.

Written after ``marked_light.py``, before any run of it, to test r2ac's defaults on a memory of the agent's own
action: the hint says what the first guess revealed, not which guess it was, so the answer at the query (the first
guess plus what the hint says, round the three doors) needs the guess kept beside the hint. No frame shows the
guess; an agent sees it only if its core is given its previous action. The class says so the way POPGym's tasks
do, with ``obs_requires_prev_action = True``, which r2ac's ``model.prev_action_input: auto`` reads (on here, off
for the earlier tasks). An agent blind to its own actions could still win by always making the same first guess,
but nothing it sees tells it which guess it made, so its values cannot credit one; with the hint alone it is right
on 1/3 of the episodes. ``tools/first_guess_answers.py`` splits a run's answers by whether the first guess was
right. Quickstart's settings reached 0.9 at span 150 on 3/3 seeds in 6.4-7.8 minutes on 2 cores (3.5-4.4 M agent
steps), at span 300 in 13.8 (one seed), at span 500 on none of three within 20 minutes (the third, given 40, in
33.6); with the previous action withheld, and with TBPTT, at chance (docs/results.md, "A first guess and a hint"):

    r2ac train configs/quickstart.yaml env.id=gym:examples.first_guess:FirstGuess "env.options={span: 150}" \\
        total_steps=3000000
    r2ac bench memory --tasks gym:examples.first_guess:FirstGuess --methods rtrl --seeds 0,1,2 --minutes 10 \\
        --steps 0 --out results/user_task/guess150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

DOORS = 3
GUESS = 200  # the first frame's light grey: make a first guess
HINTS = np.array(((40, 200, 60), (230, 40, 40), (50, 90, 240)), np.uint8)  # right door = guess + 0 / + 1 / + 2, round
QUERY = 100  # the query frame's grey


class FirstGuess(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}
    #: the observation says what the first guess revealed, not which guess it was (POPGym's name for this)
    obs_requires_prev_action = True

    def __init__(self, span: int = 150, size: int = 16) -> None:
        if span < 2:
            raise ValueError(f"span must be >= 2 (the guess's frame, the hint's frame, then the query), got {span}")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.span, self.size = int(span), int(size)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(DOORS)
        self.t = 0
        self.door = 0  # the right door
        self.guess = 0  # the first guess (the action at frame 0)

    @property
    def hint(self) -> int:
        """What the hint frame shows: how many doors on from the first guess the right one lies, round."""
        return (self.door - self.guess) % DOORS

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        if self.t == 0:
            frame[:] = GUESS
        elif self.t == 1:
            frame[:] = HINTS[self.hint]
        elif self.t == self.span:
            frame[:] = QUERY
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.door = int(self.np_random.integers(DOORS))
        self.guess = 0
        return self._frame(), {}

    def step(self, action):
        action = int(action)
        if not 0 <= action < DOORS:
            raise ValueError(f"action must be a door, 0 .. {DOORS - 1}, got {action}")
        if self.t == self.span:
            return self._frame(), float(action == self.door), True, False, {}
        if self.t == 0:
            self.guess = action
        self.t += 1
        return self._frame(), 0.0, False, False, {}
