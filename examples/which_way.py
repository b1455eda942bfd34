"""A fourth long-credit task written the way a user would write one: which way something moved, seen once.

WhichWay: RGB frames, channels last, ``(size, size, 3)`` uint8. At step 0 a ball (a ``ball`` x ``ball`` square of
one colour, the same in every episode) sits at a random place on a black frame; at step 1 it has moved ``stride``
pixels in one of four directions (0 up, 1 down, 2 left, 3 right) and then it is gone. No single frame tells the
direction: only the two frames together do. Then ``span`` black frames follow; with ``distractors > 0`` each of
them shows, with that probability, the ball at a random place (a ball standing still, which says nothing about
the direction). Then the query frame (all frame grey) asks which way the ball moved: the action taken there ends
the episode and pays 1 if it names the direction, 0 otherwise; actions elsewhere do nothing.

Written after ``where_was_it.py`` to test r2ac's defaults on a task none of them was chosen on. At span 150
quickstart's settings learned it slowly: no seed of three reached 0.9 in 8 minutes (4 M agent steps); given 20
minutes, seeds 0 and 1 did, at 6.5 and 5.8 M, and seed 2 had 0.76; at span 5 it took 0.44 M (docs/results.md,
"Two more tasks of a user's own"). Two frames in one observation (``env.frame_stack=2``) took the runs from
chance in about half the agent steps but at 2.5x the cost of a step on 2 cores ("Which way a ball moved: two
frames in one observation"). Since each channel's centroid is an input (``model.frame_centroids: auto``, the
default from 2026-11-30) all three seeds reached 0.9 in 1.8-2.6 M steps, 5.5-8.3 minutes ("Where an object is,
as two numbers"). Give it a budget beyond that:

    r2ac train configs/quickstart.yaml env.id=gym:examples.which_way:WhichWay "env.options={span: 150}" \
        total_steps=5000000
    r2ac bench memory --tasks gym:examples.which_way:WhichWay --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_task/which_way150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

BALL = np.array((250, 160, 40), np.uint8)  # orange
QUERY = 100  # the query frame's grey
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (dy, dx) per direction: up, down, left, right


class WhichWay(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 20, ball: int = 3, stride: int = 3,
                 distractors: float = 0.0) -> None:
        if ball < 1 or stride < 1 or ball + stride > size:
            raise ValueError(f"ball and stride must be >= 1 with ball + stride <= size ({size}), "
                             f"got ball={ball}, stride={stride}")
        if not 0.0 <= distractors <= 1.0:
            raise ValueError(f"distractors is a probability in [0, 1], got {distractors}")
        if span < 0:
            raise ValueError(f"span must be >= 0, got {span}")
        self.span, self.size, self.ball, self.stride = int(span), int(size), int(ball), int(stride)
        self.distractors = float(distractors)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.t = 0
        self.direction = 0
        self.start = (0, 0)

    def _with_ball(self, frame: np.ndarray, y: int, x: int) -> np.ndarray:
        frame[y:y + self.ball, x:x + self.ball] = BALL
        return frame

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        y, x = self.start
        if self.t == 0:
            return self._with_ball(frame, y, x)
        if self.t == 1:
            dy, dx = MOVES[self.direction]
            return self._with_ball(frame, y + dy * self.stride, x + dx * self.stride)
        if self.t == self.span + 2:  # the query
            frame[:] = QUERY
            return frame
        if self.distractors and self.np_random.random() < self.distractors:
            y, x = self.np_random.integers(0, self.size - self.ball + 1, 2)
            return self._with_ball(frame, int(y), int(x))
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.direction = int(self.np_random.integers(4))
        dy, dx = MOVES[self.direction]
        # a start from which the move stays on the frame
        room = self.size - self.ball - self.stride
        y, x = (int(v) for v in self.np_random.integers(0, room + 1, 2))
        self.start = (y + self.stride * (dy < 0) + self.np_random.integers(0, self.stride + 1) * (dy == 0),
                      x + self.stride * (dx < 0) + self.np_random.integers(0, self.stride + 1) * (dx == 0))
        self.start = (int(self.start[0]), int(self.start[1]))
        return self._frame(), {}

    def step(self, action):
        if self.t == self.span + 2:
            return self._frame(), float(int(action) == self.direction), True, False, {}
        self.t += 1
        return self._frame(), 0.0, False, False, {}
