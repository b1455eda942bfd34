"""A twentieth long-credit task written the way a user would write one: two keys, taken far apart, and one door.

TwoKeys: RGB frames, channels last, ``(size, size, 3)`` uint8, three actions: 0, 1 and 2 reach into the left,
middle and right third of the frame. The first frame shows a yellow key in one of the thirds, drawn at random; the
action taken there takes it if it names the key's third. The frame after it shows a yellow bar along its top edge if
the key was taken, and is black if not. Frame ``span // 2`` shows a blue key in a third drawn afresh, taken the same
way, and the frame after it a blue bar along the bottom edge if it was taken. Every other frame is black, and the
actions on them do nothing. Frame ``span`` is the door, a white frame: whatever the action, it ends the episode.

With ``pay="both"`` (the default) the door pays ``door_reward`` only if both keys were taken: a credit that is a
conjunction of two choices made ``span`` and ``span - span // 2`` frames before it, neither worth anything alone.
With ``pay="each"`` it pays half of ``door_reward`` for each key taken, the same choices with credit of their own,
for a side-by-side contrast. ``info["success"]`` at the end says whether both keys were taken (chance 1/9).

Written after ``key_apples.py``, before any run of it. In ``key_apples.py`` one choice is paid at the door; here the
value of the blue key depends on whether the yellow one was taken, which the agent saw half an episode before, and
the yellow key's value on a choice still to come. Rewards are 0 or 1 with ``pay="both"``, so quickstart's entropy
cost and logit penalty (sized to a reward unit of 1) hold each choice as in the suite's tasks. Quickstart's settings
reached 0.9 on 3/3 seeds at span 150 in 0.22-0.24 M steps (as fast as with ``pay="each"``), at 500 in 0.70-0.78 M and
at 1000 (100x M) in 1.60-1.93 M; at 3000 seed 0 stopped at 0.54, where a first key worth 0.999^3000 = 0.05 to the
values is held at p = 0.56 by the entropy bonus; TBPTT with the same M stayed at chance (docs/results.md, "Two keys").

    r2ac train configs/quickstart.yaml env.id=gym:examples.two_keys:TwoKeys "env.options={span: 150}" \\
        total_steps=3000000
    r2ac bench memory --tasks gym:examples.two_keys:TwoKeys --methods rtrl --seeds 0,1,2 --minutes 10 \\
        --steps 0 --out results/user_task/twokeys150 env.options.span=150

(run from the repository root, so that ``examples`` can be imported).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

THIRDS = 3  # the actions: reach into the left, middle or right third
FIRST = np.array((240, 210, 40), np.uint8)  # yellow: the first key, and the top bar that says it was taken
SECOND = np.array((50, 110, 240), np.uint8)  # blue: the second key, and the bottom bar
DOOR = 255  # the door's white
PAYS = ("both", "each")


class TwoKeys(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, span: int = 150, size: int = 16, pay: str = "both", door_reward: float = 1.0,
                 thing: int = 4) -> None:
        if span < 5:
            raise ValueError(f"span must be >= 5 (the first key and its bar, the second key at span // 2 and its bar, "
                             f"then the door at frame span), got {span}")
        if size < THIRDS:
            raise ValueError(f"size must be >= {THIRDS} so that the frame has three thirds, got {size}")
        if not 1 <= thing <= min(size // THIRDS, size - 2):
            raise ValueError(f"thing (a key's side) must be in 1 .. {min(size // THIRDS, size - 2)} so that it fits in "
                             f"a third of the frame between the two bars' rows, got {thing}")
        if pay not in PAYS:
            raise ValueError(f"pay must be one of {PAYS} (the door pays only both keys, or half for each), got {pay!r}")
        self.span, self.size, self.thing, self.pay = int(span), int(size), int(thing), pay
        self.middle = self.span // 2  # the second key's frame
        self.door_reward = float(door_reward)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(THIRDS)
        self.t = 0
        self.keys = [0, 0]  # each key's third
        self.taken = [False, False]
        self.place = (0, 0)  # the (row, column) of the key on the current frame

    def _show(self, third: int) -> tuple:
        """A random place for a key in ``third``, between the top and bottom rows: its top-left (row, column)."""
        width = self.size // THIRDS
        row = int(self.np_random.integers(1, self.size - self.thing))
        col = third * width + int(self.np_random.integers(0, width - self.thing + 1))
        return row, col

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        r, c = self.place
        if self.t == 0:
            frame[r:r + self.thing, c:c + self.thing] = FIRST
        elif self.t == self.middle:
            frame[r:r + self.thing, c:c + self.thing] = SECOND
        elif self.t == 1 and self.taken[0]:
            frame[0] = FIRST
        elif self.t == self.middle + 1 and self.taken[1]:
            frame[-1] = SECOND
        elif self.t == self.span:
            frame[:] = DOOR
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.taken = 0, [False, False]
        self.keys = [int(self.np_random.integers(THIRDS)), int(self.np_random.integers(THIRDS))]
        self.place = self._show(self.keys[0])
        return self._frame(), {}

    def door_pays(self) -> float:
        if self.pay == "both":
            return self.door_reward if all(self.taken) else 0.0
        return 0.5 * self.door_reward * sum(self.taken)

    def step(self, action):
        action = int(action)
        if not 0 <= action < THIRDS:
            raise ValueError(f"action must name a third of the frame, 0 .. {THIRDS - 1}, got {action}")
        if self.t == self.span:
            info = {"success": float(all(self.taken)), "first": float(self.taken[0]), "second": float(self.taken[1])}
            return self._frame(), self.door_pays(), True, False, info
        if self.t == 0:
            self.taken[0] = action == self.keys[0]
        elif self.t == self.middle:
            self.taken[1] = action == self.keys[1]
        self.t += 1
        if self.t == self.middle:
            self.place = self._show(self.keys[1])
        return self._frame(), 0.0, False, False, {}
