"""Small pieces the experiment scripts share: reading a run's learning curve, writing the results table."""

from __future__ import annotations

import csv
import os
from typing import Sequence, Tuple

import numpy as np


def read_curve(metrics_csv: str) -> Tuple[np.ndarray, np.ndarray]:
    """(agent steps, training episode return) of the rows of a run's ``metrics.csv`` that report a return."""
    xs, ys = [], []
    with open(metrics_csv) as f:
        for r in csv.DictReader(f):
            if r.get("episode_return") not in (None, "", "nan"):
                xs.append(float(r["step"]))
                ys.append(float(r["episode_return"]))
    return np.array(xs), np.array(ys)


def write_results_md(out_dir: str, lines: Sequence[str], preamble: str = "") -> str:
    """Write ``lines`` (a markdown table and its heading) to ``out_dir/results.md`` after ``preamble``,
    print them, and return the text."""
    text = "\n".join(lines)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(preamble + text + "\n")
    print(text)
    return text
