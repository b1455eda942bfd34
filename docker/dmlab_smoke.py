"""Smoke test for a freshly built DeepMind Lab wheel (run by docker/dmlab.Dockerfile).

Loads a built-in test level headless with the software (OSMesa) renderer, takes a
few steps and checks the observation's shape. Exits non-zero on any failure, which
fails the image build.
"""

import sys

import numpy as np


def main() -> int:
    import deepmind_lab

    width, height = 80, 60
    lab = deepmind_lab.Lab(
        "tests/empty_room_test",
        ["RGB_INTERLACED"],
        config={"fps": "60", "width": str(width), "height": str(height)},
        renderer="software",
    )
    lab.reset(seed=1)
    frame = lab.observations()["RGB_INTERLACED"]
    action = np.zeros(len(lab.action_spec()), dtype=np.intc)
    for _ in range(10):
        if not lab.is_running():
            lab.reset()
        lab.step(action, num_steps=4)
    lab.close()
    if frame.shape != (height, width, 3) or frame.dtype != np.uint8:
        print(f"unexpected observation {frame.shape} {frame.dtype}", file=sys.stderr)
        return 1
    print(f"deepmind_lab OK: observation {frame.shape} {frame.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
