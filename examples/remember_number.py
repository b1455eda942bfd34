"""A second long-credit task written the way a user would write one: a plain Gymnasium env with a vector
observation, outside r2ac.

RememberNumber: at step 0 the agent is shown a number ``a``, uniform in [0, 1], with a flag that says
"remember this". Then ``span`` steps show nothing (zeros); with ``distractors > 0`` each of them shows, with
that probability, another random number without the flag, so the agent must keep the flagged one and not the
latest. Then the query step shows a second number ``b`` with a query flag: action 1 says "a was larger",
action 0 "a was smaller"; it ends the episode and pays 1 if right, 0 otherwise. A guess pays 0.5; a guess from
``b`` alone, without memory ("smaller" when b > 1/2), pays 0.75 on average; only a kept ``a`` pays more.
Actions elsewhere do nothing. Unlike a colour (one of a few categories), ``a`` is a quantity: the closer
``b`` comes to it, the more precisely it must have been kept, so a memory that blurs it pays less than 1
however well it is read.

Observations: ``[number, remember flag, query flag]``, float32.

Nothing of r2ac was tuned on it. Train it with quickstart's settings:

    r2ac train configs/quickstart.yaml env.id=gym:examples.remember_number:RememberNumber "env.options={span: 150}"
    r2ac bench memory --tasks gym:examples.remember_number:RememberNumber --seeds 0,1,2 --minutes 10 --steps 0 \
        --out results/user_number env.options.span=150

(run from the repository root, so that ``examples`` can be imported; see docs/environments.md, "Your
own task").
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class RememberNumber(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, distractors: float = 0.0) -> None:
        if span < 0:
            raise ValueError(f"span must be >= 0, got {span}")
        if not 0.0 <= distractors <= 1.0:
            raise ValueError(f"distractors is a probability in [0, 1], got {distractors}")
        self.span, self.distractors = int(span), float(distractors)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.a = self.b = 0.0

    def _obs(self) -> np.ndarray:
        if self.t == 0:
            return np.array([self.a, 1.0, 0.0], np.float32)
        if self.t == self.span + 1:  # the query
            return np.array([self.b, 0.0, 1.0], np.float32)
        if self.distractors and self.np_random.random() < self.distractors:
            return np.array([self.np_random.random(), 0.0, 0.0], np.float32)
        return np.zeros(3, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.a, self.b = (float(v) for v in self.np_random.random(2))
        return self._obs(), {}

    def step(self, action):
        if self.t == self.span + 1:
            right = int(action) == int(self.a > self.b)
            return self._obs(), float(right), True, False, {}
        self.t += 1
        return self._obs(), 0.0, False, False, {}
