"""Fixtures of the runtime tests: ``ray_local``, one local Ray instance for the whole session (its workers
import the test envs of this folder, e.g. ``gym:test_runtime_faults:FaultyEnv``)."""

import os

import pytest

RUNTIME_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray instance for the whole session; its workers can import modules of tests/runtime
    (test envs).
    Yields the GCS address (for drivers in subprocesses)."""
    import ray

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = RUNTIME_TESTS_DIR + (os.pathsep + old if old else "")  # inherited by raylet -> workers
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
