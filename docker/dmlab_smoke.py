"""Smoke test for a DeepMind Lab wheel (run by docker/dmlab.Dockerfile).

Loads rooms_watermaze headless with the software (OSMesa) renderer at the size r2ac uses (96x72),
steps it with action repeat 4 and checks the frames. Exits non-zero on any failure, which fails the
image build.
"""

import sys

import numpy as np


def main() -> int:
    import deepmind_lab

    width, height = 96, 72
    lab = deepmind_lab.Lab("contributed/dmlab30/rooms_watermaze", ["RGB_INTERLEAVED"],
                           config={"width": str(width), "height": str(height), "logLevel": "WARN"},
                           renderer="software")
    lab.reset(seed=1)
    first = lab.observations()["RGB_INTERLEAVED"]
    action = np.zeros(len(lab.action_spec()), dtype=np.intc)
    action[0] = 20  # look right
    for _ in range(10):
        if not lab.is_running():
            lab.reset()
        lab.step(action, num_steps=4)
    last = lab.observations()["RGB_INTERLEAVED"]
    lab.close()
    if first.shape != (height, width, 3) or first.dtype != np.uint8:
        print(f"unexpected observation {first.shape} {first.dtype}", file=sys.stderr)
        return 1
    if first.std() < 5 or np.array_equal(first, last):
        print("frames look blank or do not change when turning", file=sys.stderr)
        return 1
    print(f"deepmind_lab OK: observation {first.shape} {first.dtype}, frames change when turning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
