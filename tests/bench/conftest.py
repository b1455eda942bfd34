"""Shared by the benchmark tests: loading a script of tools/ (not a package) as a module."""

import importlib.util
import os

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")


@pytest.fixture
def load_tool():
    """``load_tool("gate_drive")``: tools/gate_drive.py as a fresh module."""
    def load(name):
        spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
