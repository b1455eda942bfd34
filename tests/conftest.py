"""Fixtures for every test: ``float64``. The test folders mirror the package (tests/cores, tests/agent, ...);
shared helpers sit beside the tests that use them (tests/cores/coretools.py, tests/envs/dmlab_fake.py)."""

import pytest
import torch


@pytest.fixture
def float64():
    """Run a test with float64 as the default dtype (exactness tests against BPTT)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)
