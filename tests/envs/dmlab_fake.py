"""A fake ``deepmind_lab`` module implementing the documented Python API, for tests without the engine.

Imported in-process by tests (``sys.modules['deepmind_lab'] = dmlab_fake``) and by DMLab worker processes
(``R2AC_DMLAB_MODULE=dmlab_fake`` with this folder on PYTHONPATH). Episodes last ``EPISODE_FRAMES``
frames; each frame's reward is 1 while moving forward (action[3] == 1), else 0. RGB_INTERLEAVED frames
encode (frame count, reset seed % 251, row index) in (R, G, B). Like the real engine, a level whose
name contains ``natlab`` prints "Didn't find map ..." and ends the whole process with exit code 1 at
reset: use such levels only in worker processes.
"""

import os
import sys

import numpy as np

runfiles = []


def set_runfiles_path(path):
    runfiles.append(path)


class Lab:
    EPISODE_FRAMES = 20
    instances = []

    def __init__(self, level, observations, config=None, renderer="software", level_cache=None):
        assert observations == ["RGB_INTERLEAVED"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items())
        self.level, self.config, self.renderer, self.level_cache = level, dict(config), renderer, level_cache
        self.height, self.width = int(config.get("height", 240)), int(config.get("width", 320))
        self.frames, self.seed, self.running, self.closed = 0, None, False, False
        self.actions, self.num_steps, self.seeds = [], [], []
        Lab.instances.append(self)

    def reset(self, episode=-1, seed=None):
        if "natlab" in self.level:
            print("Didn't find map 'natlab_fake_map'", file=sys.stderr, flush=True)
            os._exit(1)
        self.frames, self.seed, self.running = 0, seed, True
        self.seeds.append(seed)

    def is_running(self):
        return self.running

    def observations(self):
        assert self.running, "DMLab has no observations once the episode has ended"
        o = np.zeros((self.height, self.width, 3), np.uint8)
        o[..., 0] = self.frames % 256
        o[..., 1] = self.seed % 251
        o[..., 2] = np.arange(self.height)[:, None] % 256
        return {"RGB_INTERLEAVED": o}

    def step(self, action, num_steps=1):
        assert self.running and isinstance(action, np.ndarray)
        assert action.dtype == np.intc and action.shape == (7,)
        self.actions.append(action.copy())
        self.num_steps.append(num_steps)
        reward = 0.0
        for _ in range(num_steps):
            self.frames += 1
            reward += float(action[3] == 1)
            if self.frames >= self.EPISODE_FRAMES:
                self.running = False
                break
        return reward

    def close(self):
        self.closed = True
