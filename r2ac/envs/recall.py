"""Long-credit tasks for ``r2ac bench memory``: a delayed cue (pixels or vectors, optionally with
distractors) and the copy task as an RL problem, which recall, and key to door, a choice paid late.
Numpy-vectorised like ``r2ac.envs.memory``.

``cue`` — delayed cue (``num_actions = cues``, chance ``1 / cues``)
    Step 0 shows the cue: one of ``cues`` colours. Steps 1..``span`` show blank frames (or, with
    ``distractors > 0``, noise frames with that probability per step). Step ``span + 1`` shows the query
    frame; the action taken there ends the episode with reward 1 if it names the cue (action index = cue
    index) and 0 otherwise. Actions elsewhere do nothing. The credit span from cue to decision is
    ``span + 1`` steps; an episode lasts ``span + 2`` steps. ``info["success"]`` is 1.0 / 0.0 at its end.

    Two options make the timing unknown in advance (both off by default): ``span_min`` draws each
    episode's span uniformly from ``span_min .. span``, so the query comes at a time the agent cannot
    count to; ``cue_delay`` shows the cue at a step drawn uniformly from ``cue_delay_min .. cue_delay``
    (``cue_delay_min`` 0 unless set), after blank (or distractor) frames, so the cue is not the episode's
    first frame. An episode then lasts ``delay + span + 2`` steps for its own draws.

    ``obs="pixels"``: uint8 ``(3, size, size)``; the cue fills the frame with its colour (red, green,
    blue, yellow, magenta, cyan, then greys), the query is a white frame, a distractor is uniform noise in
    every pixel. ``obs="vector"``: float32 ``(cues + 1,)``: the cue is one-hot in the first ``cues``
    entries, the query sets the last entry, a distractor puts uniform [0, 1) noise on the first ``cues``.

``copy`` — copy task as an RL problem (``num_actions = 2``, vector observations ``(4,)``)
    Steps 0..``symbols - 1`` show random bits (one-hot in entries 0/1), then ``span`` blank steps, then
    ``symbols`` query steps (entry 3). At the k-th query step the action must be the k-th bit: reward
    ``1 / symbols`` per correct bit. The credit span is ``span + symbols`` steps; ``info["success"]`` is
    1.0 when every bit was right (chance ``2 ** -symbols``); the return is the fraction right.

``keydoor`` — key to door (after Hung et al. 2019, "Optimizing agent behavior over long time scales by
transporting value"): a choice whose reward comes ``span + 1`` steps later (``num_actions = cues``)
    Step 0 shows a key: one of ``cues`` colours, as the cue of ``cue``. The action taken there takes the
    key if it names the colour. Step 1 shows the key held (an orange frame; vector entry ``cues``) if it
    was taken, a blank (or distractor) frame if not; steps 2..``span`` are blank (or distractor) frames;
    step ``span + 1`` shows the door (white; vector entry ``cues + 1``), pays 1 if the key is held,
    whatever the action, and ends the episode. Nothing at the door asks for a decision: the only choice
    is at step 0, and its reward comes ``span + 1`` steps later. An actor-critic learns it only if its
    value carries the held key across the span (the choice's advantage is bootstrapped from values ``M``
    steps on), and a discount ``gamma`` shrinks the choice's stake to ``gamma ** (span + 1)``.
    ``info["success"]`` is 1.0 / 0.0 (key held) at the end; chance ``1 / cues``. ``span >= 1``;
    ``span_min``, ``cue_delay``, ``cue_delay_min`` and ``distractors`` as for ``cue`` (with ``cue_delay``
    the key is shown, and taken, at a drawn step).
"""

from __future__ import annotations


import numpy as np

from r2ac.envs.base import EpisodeTracker, VecEnv, check_actions, nan_where_not
from r2ac.envs.memory import _check_float, _check_int

__all__ = ["CopyVecEnv", "CueVecEnv", "KeyDoorVecEnv"]

_CUE_COLOURS = np.array([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255),
                         (96, 96, 96), (160, 160, 160)], dtype=np.uint8)
_KEY_HELD_COLOUR = np.array((255, 128, 0), dtype=np.uint8)  # orange: none of the cue colours, not grey like noise


class _RecallVecEnv(VecEnv):
    """Shared stepping: per-env step counter ``t``, episode tracker, same-step autoreset."""

    def __init__(self, num_envs: int, seed: int) -> None:
        self.num_envs = _check_int("num_envs", num_envs, 1)
        self.rng = np.random.default_rng(seed)
        self.tracker = EpisodeTracker(self.num_envs)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self._needs_reset = True

    def _new_episodes(self, mask: np.ndarray) -> None:
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        raise NotImplementedError

    def _reward(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(reward, episode over, success at episode end) for the current step's actions."""
        raise NotImplementedError

    def reset(self) -> np.ndarray:
        self._new_episodes(np.ones(self.num_envs, dtype=bool))
        self.tracker.reset()
        self._needs_reset = False
        return self._observe()

    def episode_steps(self) -> int:
        """Steps every episode lasts (the longest, where episodes differ)."""
        raise NotImplementedError

    def _current_lengths(self) -> np.ndarray:
        """Steps the current episode of each env lasts."""
        return np.full(self.num_envs, self.episode_steps(), dtype=np.int64)

    def desync(self, rng: np.random.Generator) -> np.ndarray:
        if self._needs_reset:
            raise RuntimeError("call reset() before desync()")
        lengths = self._current_lengths()
        if (lengths == lengths[0]).all():  # every episode the same length: one draw bound (the streams of before)
            self.t[:] = rng.integers(0, int(lengths[0]), size=self.num_envs)
        else:
            self.t[:] = rng.integers(0, lengths)
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_actions(actions, self.num_envs, self.num_actions)
        reward, done, success = self._reward(actions)
        self.t += 1
        info = self.tracker.update(reward, done)
        info["success"] = nan_where_not(done, success)
        info["truncated"] = np.zeros(self.num_envs, dtype=bool)
        if done.any():
            self._new_episodes(done)
        return self._observe(), reward, done, info


class CueVecEnv(_RecallVecEnv):
    """Delayed cue (see the module docstring)."""

    def __init__(self, num_envs: int, seed: int, *, span: int = 100, cues: int = 3, obs: str = "pixels",
                 size: int = 16, distractors: float = 0.0, span_min: int | None = None,
                 cue_delay: int = 0, cue_delay_min: int = 0) -> None:
        super().__init__(num_envs, seed)
        self.span = _check_int("span", span, 0)
        self.span_min = self.span if span_min is None else _check_int("span_min", span_min, 0)
        if self.span_min > self.span:
            raise ValueError(f"option 'span_min' must be <= span ({self.span}), got {span_min}: each episode's "
                             f"span is drawn from span_min .. span")
        self.cue_delay = _check_int("cue_delay", cue_delay, 0)
        self.cue_delay_min = _check_int("cue_delay_min", cue_delay_min, 0)
        if self.cue_delay_min > self.cue_delay:
            raise ValueError(f"option 'cue_delay_min' must be <= cue_delay ({self.cue_delay}), got {cue_delay_min}: "
                             f"the cue's step is drawn from cue_delay_min .. cue_delay (set both to show it at one "
                             f"fixed step)")
        self.cues = _check_int("cues", cues, 2)
        if self.cues > len(_CUE_COLOURS):
            raise ValueError(f"option 'cues' must be <= {len(_CUE_COLOURS)}, got {cues}")
        if obs not in ("pixels", "vector"):
            raise ValueError(f"option 'obs' must be 'pixels' or 'vector', got {obs!r}")
        self.obs = obs
        self.size = _check_int("size", size, 1)
        self.distractors = _check_float("distractors", distractors)
        if not 0.0 <= self.distractors <= 1.0:
            raise ValueError(f"option 'distractors' must be a probability in [0, 1], got {distractors!r}")
        self.num_actions = self.cues
        if obs == "pixels":
            self.observation_shape = (3, self.size, self.size)
            self.observation_dtype = np.uint8
        else:
            self.observation_shape = (self.cues + 1,)
            self.observation_dtype = np.float32
        self.cue = np.zeros(self.num_envs, dtype=np.int64)
        self.cue_step = np.zeros(self.num_envs, dtype=np.int64)  # step of the episode that shows the cue
        self.query_step = np.full(self.num_envs, self.span + 1, dtype=np.int64)  # the step that decides

    def episode_steps(self) -> int:
        return self.cue_delay + self.span + 2

    def _current_lengths(self) -> np.ndarray:
        return self.query_step + 1

    def _new_episodes(self, mask: np.ndarray) -> None:
        k = int(mask.sum())
        self.cue[mask] = self.rng.integers(0, self.cues, size=k)
        self.t[mask] = 0
        if self.cue_delay or self.span_min < self.span:  # the fixed layout draws nothing more (same streams)
            self.cue_step[mask] = self.rng.integers(self.cue_delay_min, self.cue_delay + 1, size=k)
            self.query_step[mask] = self.cue_step[mask] + self.rng.integers(self.span_min, self.span + 1, size=k) + 1

    def _observe(self) -> np.ndarray:
        n = self.num_envs
        at_cue, at_query = self.t == self.cue_step, self.t == self.query_step
        noise = (~at_cue & ~at_query) & (self.rng.random(n) < self.distractors) if self.distractors > 0 else None
        if self.obs == "vector":
            o = np.zeros((n, self.cues + 1), dtype=np.float32)
            o[at_cue, self.cue[at_cue]] = 1.0
            o[at_query, -1] = 1.0
            if noise is not None and noise.any():
                o[noise, :-1] = self.rng.random((int(noise.sum()), self.cues), dtype=np.float32)
            return o
        o = np.zeros((n, 3, self.size, self.size), dtype=np.uint8)
        o[at_cue] = _CUE_COLOURS[self.cue[at_cue]][:, :, None, None]
        o[at_query] = 255
        if noise is not None and noise.any():
            o[noise] = self.rng.integers(0, 256, size=(int(noise.sum()), 3, self.size, self.size), dtype=np.uint8)
        return o

    def _reward(self, actions):
        done = self.t == self.query_step
        success = done & (actions == self.cue)
        return success.astype(np.float32), done, success.astype(np.float64)


class CopyVecEnv(_RecallVecEnv):
    """Copy task as an RL problem (see the module docstring)."""

    num_actions = 2
    observation_shape = (4,)
    observation_dtype = np.float32

    def __init__(self, num_envs: int, seed: int, *, span: int = 100, symbols: int = 3) -> None:
        super().__init__(num_envs, seed)
        self.span = _check_int("span", span, 0)
        self.symbols = _check_int("symbols", symbols, 1)
        self.bits = np.zeros((self.num_envs, self.symbols), dtype=np.int64)
        self.right = np.zeros(self.num_envs, dtype=np.int64)

    def episode_steps(self) -> int:
        return self.span + 2 * self.symbols

    def _new_episodes(self, mask: np.ndarray) -> None:
        self.bits[mask] = self.rng.integers(0, 2, size=(int(mask.sum()), self.symbols))
        self.right[mask] = 0
        self.t[mask] = 0

    def _observe(self) -> np.ndarray:
        n, L = self.num_envs, self.symbols
        o = np.zeros((n, 4), dtype=np.float32)
        show = self.t < L
        o[show, self.bits[show, self.t[show]]] = 1.0
        o[self.t >= L + self.span, 3] = 1.0
        blank = ~show & (self.t < L + self.span)
        o[blank, 2] = 1.0
        return o

    def _reward(self, actions):
        L = self.symbols
        k = self.t - L - self.span  # index of the bit asked for at a query step
        query = k >= 0
        correct = query & (actions == self.bits[np.arange(self.num_envs), np.clip(k, 0, L - 1)])
        self.right += correct
        done = k == L - 1
        return correct.astype(np.float32) / L, done, (self.right == L).astype(np.float64)


class KeyDoorVecEnv(CueVecEnv):
    """Key to door (see the module docstring): the cue's layout, with the choice at the cue and the
    reward at the query (the door)."""

    def __init__(self, num_envs: int, seed: int, *, span: int = 100, cues: int = 3, obs: str = "pixels",
                 size: int = 16, distractors: float = 0.0, span_min: int | None = None,
                 cue_delay: int = 0, cue_delay_min: int = 0) -> None:
        for name, value in (("span", span), ("span_min", span if span_min is None else span_min)):
            if _check_int(name, value, 0) < 1:
                raise ValueError(f"option {name!r} must be >= 1 for keydoor, got {value}: the frame after the "
                                 f"choice shows the key held, and the door comes after it")
        super().__init__(num_envs, seed, span=span, cues=cues, obs=obs, size=size, distractors=distractors,
                         span_min=span_min, cue_delay=cue_delay, cue_delay_min=cue_delay_min)
        if obs == "vector":
            self.observation_shape = (self.cues + 2,)
        self.held = np.zeros(self.num_envs, dtype=bool)

    def _new_episodes(self, mask: np.ndarray) -> None:
        super()._new_episodes(mask)
        self.held[mask] = False

    def desync(self, rng: np.random.Generator) -> np.ndarray:
        self.held[:] = False  # an env started past its choice holds no key
        return super().desync(rng)

    def _observe(self) -> np.ndarray:
        o = super()._observe()
        shown = self.held & (self.t == self.cue_step + 1)  # the frame after a taken key (never the door: span >= 1)
        if self.obs == "pixels":
            o[shown] = _KEY_HELD_COLOUR[:, None, None]
            return o
        v = np.zeros((self.num_envs, self.cues + 2), dtype=np.float32)
        v[:, :self.cues] = o[:, :self.cues]
        v[:, self.cues + 1] = o[:, self.cues]  # the door
        v[shown] = 0.0
        v[shown, self.cues] = 1.0
        return v

    def _reward(self, actions):
        choose = self.t == self.cue_step
        self.held[choose] = actions[choose] == self.cue[choose]
        done = self.t == self.query_step
        paid = done & self.held
        return paid.astype(np.float32), done, paid.astype(np.float64)
