"""``set_fast_math``: what every training process sets before it trains."""

import platform
import subprocess
import sys

import pytest


def test_fast_math_keeps_freed_memory_on_glibc_and_flushes_denormals():
    """In a fresh process: glibc takes both malloc settings (elsewhere they are skipped, and the call
    says so), a second call changes nothing, and denormals flush to zero."""
    code = (
        "import torch\n"
        "from r2ac.runtime.session import keep_freed_memory, set_fast_math\n"
        "set_fast_math(1)\n"
        "print(keep_freed_memory(), keep_freed_memory(), float(torch.tensor(1e-39) * 1.0) == 0.0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out == [str(glibc), str(glibc), "True"]


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"),
                    reason="glibc's malloc only")
def test_freed_sensitivity_sized_blocks_stay_in_the_process():
    """The effect itself, on what RTRL allocates: an eLSTM carrying its sensitivities (2.4 MB each here) from
    segment to segment. With glibc's defaults each segment's new sensitivities fault fresh pages in (the
    freed ones went back to the system); with the settings they reuse the freed memory."""
    code = (
        "import resource, sys, torch\n"
        "from r2ac.runtime.session import keep_freed_memory\n"
        "from r2ac.cores.elstm import ELSTM\n"
        "kept = sys.argv[1] == '1' and keep_freed_memory()\n"
        "core = ELSTM(600, 32, learning='rtrl')\n"
        "x, reset = torch.randn(10, 32, 600), torch.zeros(10, 32, dtype=torch.bool)\n"
        "st = core.initial_state(32)\n"
        "with torch.no_grad():\n"
        "    for _ in range(3): _, st = core(x, st, reset)\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "    for _ in range(20): _, st = core(x, st, reset)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n")
    faults = {k: int(subprocess.run([sys.executable, "-c", code, k], capture_output=True, text=True,
                                    check=True).stdout) for k in ("0", "1")}
    assert faults["1"] < 500 and faults["0"] > 5000, faults  # measured: 0 and about 11 800
