import os

import pytest
import torch

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def float64():
    """Run a test with float64 as the default dtype (exactness tests against BPTT)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray instance for the whole session; its workers can import modules of tests/ (test envs).
    Yields the GCS address (for drivers in subprocesses)."""
    import ray

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = TESTS_DIR + (os.pathsep + old if old else "")  # inherited by raylet -> workers
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, resources={"learner": 1}, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        if started:
            ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
