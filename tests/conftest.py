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


@pytest.fixture
def cuda():
    """The CUDA device, or a skip where there is none (CI and the project's CPU machines): the tests that
    take it check the CUDA path on a GPU machine (docs/results.md, "On a GPU")."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the CUDA path is checked on a GPU machine (docs/results.md, 'On a GPU')")
    return torch.device("cuda")


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """Keep W&B offline and out of $HOME / cwd (its dirs under tmp_path)."""
    for var in ("WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR",
                "WANDB_ARTIFACT_DIR"):
        d = tmp_path / var.lower()
        d.mkdir()
        monkeypatch.setenv(var, str(d))
    return tmp_path
