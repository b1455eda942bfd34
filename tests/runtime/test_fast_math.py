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


_GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _GLIBC, reason="glibc's malloc only")
def test_a_sensitivity_sized_block_comes_from_the_heap_not_its_own_mmap():
    """The setting itself, read from glibc (mallinfo2's bytes in mmapped blocks): in a fresh process a 16 MB
    tensor gets its own mmap under glibc's defaults (handed back to the system when freed, its pages faulted in
    afresh next time), and comes from the heap with the settings."""
    code = (
        "import ctypes, sys, torch\n"
        "from r2ac.runtime.session import keep_freed_memory\n"
        "class Info(ctypes.Structure):\n"
        "    _fields_ = [(n, ctypes.c_size_t) for n in 'arena ordblks smblks hblks hblkhd usmblks fsmblks "
        "uordblks fordblks keepcost'.split()]\n"
        "libc = ctypes.CDLL('libc.so.6'); libc.mallinfo2.restype = Info\n"
        "kept = sys.argv[1] == '1' and keep_freed_memory()\n"
        "before = libc.mallinfo2().hblkhd\n"
        "t = torch.empty(4 << 20)\n"
        "print(libc.mallinfo2().hblkhd - before)\n")
    mmapped = {k: int(subprocess.run([sys.executable, "-c", code, k], capture_output=True, text=True,
                                     check=True).stdout) for k in ("0", "1")}
    assert mmapped["0"] >= 16 << 20 and mmapped["1"] == 0, mmapped
