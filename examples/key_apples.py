"""A nineteenth long-credit task written the way a user would write one: a key, apples on the way, and a door.

KeyApples: RGB frames, channels last, ``(size, size, 3)`` uint8, three actions: 0, 1 and 2 reach into the left,
middle and right third of the frame. The first frame shows a yellow key in one of the thirds, drawn at random; the
action taken there takes the key if it names the key's third, and pays nothing. The second frame shows a yellow bar
along its top edge if the key was taken, and is black if not. The frames after it, up to frame ``span - 1``, are
the apple phase: on each, with probability ``apple_rate``, a green apple shows in a random third, and the action
taken on that frame picks it if it names the apple's third, for ``apple_reward`` at once; other frames are black.
Frame ``span`` is the door, a white frame: whatever the action, it ends the episode and pays ``door_reward`` if the
key was taken, nothing if not. ``info["success"]`` at the end says whether the door paid; chance is 1/3.

Written after ``look_first.py``, before any run of it, after the key-to-door task of Hung et al. (2019,
"Optimizing agent behavior over long time scales by transporting value"), whose point is its middle phase: rewards
on the way that have nothing to do with the key. By default the apples pay about 4.4 per episode at span 150 to an
agent that picks them all (0.3 x 148 apples of 0.1), more than the door's 1, and their total varies from episode
to episode by half of what the door pays (a standard deviation of 5.6 apples, 0.56). The choice at the first frame is
paid only ``span`` frames later, through values that must carry the taken key across a span full of rewards of
their own; an agent that picks every apple and ignores the key opens the door on 1/3 of the episodes. The return
is not the success rate here, so the env reports ``info["success"]``: r2ac logs it as ``episode_success`` and
``r2ac bench memory`` judges a ``gym:`` task by it. With ``apple_rate=0`` it is key to door alone. Quickstart's
settings reached 0.9 at span 150 on 3/3 seeds in 0.4-0.5 minutes on 2 cores (0.18-0.22 M steps, 1.06x the steps
without apples), picking 0.76-0.77 of the apples (the loss's own optimum for a choice worth a tenth of the door:
``tools/held_answers.py``), at span 500 on 3/3 in 0.80-1.01 M steps and at span 1000 on 3/3 within 25 minutes; TBPTT
with the same M on 1/3 at span 150 (docs/results.md, "Key and apples"). ``tools/key_apples_picked.py`` gives the
share of apples picked.

    r2ac train configs/quickstart.yaml env.id=gym:examples.key_apples:KeyApples "env.options={span: 150}" \\
        total_steps=3000000
    r2ac bench memory --tasks gym:examples.key_apples:KeyApples --methods rtrl --seeds 0,1,2 --minutes 10 \\
        --steps 0 --out results/user_task/apples150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

THIRDS = 3  # the actions: reach into the left, middle or right third
KEY = np.array((240, 210, 40), np.uint8)  # yellow: the key, and the bar that says it was taken
APPLE = np.array((40, 200, 60), np.uint8)  # green
DOOR = 255  # the door's white


class KeyApples(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, apple_rate: float = 0.3, apple_reward: float = 0.1,
                 door_reward: float = 1.0, thing: int = 4) -> None:
        if span < 3:
            raise ValueError(f"span must be >= 3 (the key's frame, the frame that shows it taken, at least one apple "
                             f"frame, then the door at frame span), got {span}")
        if size < THIRDS:
            raise ValueError(f"size must be >= {THIRDS} so that the frame has three thirds, got {size}")
        if not 1 <= thing <= size // THIRDS:
            raise ValueError(f"thing (the key's and an apple's side) must be in 1 .. size // 3 ({size // THIRDS}) so "
                             f"that it fits in a third of the frame, got {thing}")
        if not 0.0 <= apple_rate <= 1.0:
            raise ValueError(f"apple_rate must be a probability in [0, 1], got {apple_rate}")
        self.span, self.size, self.thing = int(span), int(size), int(thing)
        self.apple_rate, self.apple_reward = float(apple_rate), float(apple_reward)
        self.door_reward = float(door_reward)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(THIRDS)
        self.t = 0
        self.key = 0  # the key's third
        self.held = False  # the key was taken
        self.apple = -1  # the third of the apple on the current frame (-1: none)
        self.place = (0, 0)  # the (row, column) of the current key or apple
        self.apples = 0  # apples picked this episode

    def _show(self, third: int) -> tuple:
        """A random place for a thing in ``third``: its top-left (row, column)."""
        width = self.size // THIRDS
        row = int(self.np_random.integers(1, self.size - self.thing + 1))  # below the top row (the bar's)
        col = third * width + int(self.np_random.integers(0, width - self.thing + 1))
        return row, col

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        r, c = self.place
        if self.t == 0:
            frame[r:r + self.thing, c:c + self.thing] = KEY
        elif self.t == 1:
            if self.held:
                frame[0] = KEY
        elif self.t == self.span:
            frame[:] = DOOR
        elif self.apple >= 0:
            frame[r:r + self.thing, c:c + self.thing] = APPLE
        return frame

    def _next_apple(self) -> None:
        self.apple = -1
        if 2 <= self.t < self.span and self.np_random.random() < self.apple_rate:
            self.apple = int(self.np_random.integers(THIRDS))
            self.place = self._show(self.apple)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.held, self.apple, self.apples = 0, False, -1, 0
        self.key = int(self.np_random.integers(THIRDS))
        self.place = self._show(self.key)
        return self._frame(), {}

    def step(self, action):
        action = int(action)
        if not 0 <= action < THIRDS:
            raise ValueError(f"action must name a third of the frame, 0 .. {THIRDS - 1}, got {action}")
        if self.t == self.span:
            info = {"success": float(self.held), "apples": float(self.apples)}
            return self._frame(), self.door_reward if self.held else 0.0, True, False, info
        reward = 0.0
        if self.t == 0:
            self.held = action == self.key
        elif self.apple >= 0 and action == self.apple:
            reward = self.apple_reward
            self.apples += 1
        self.t += 1
        self._next_apple()
        return self._frame(), reward, False, False, {}
