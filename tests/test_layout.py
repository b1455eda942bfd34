"""The package layout's dependency rules (docs/architecture.md), checked on the source: imports point from
the outside in, and code outside r2ac/runtime uses the runtime's public names only."""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "r2ac")

# package -> the r2ac packages and modules it may import (besides itself)
ALLOWED = {
    "cores": set(),
    "tasks": set(),
    "envs": set(),
    "agent": {"cores", "fileio"},
    "online": {"cores", "tasks"},
}


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _modules(package=None):
    base = os.path.join(ROOT, package) if package else ROOT
    for d, _, files in os.walk(base):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_inner_packages_import_nothing_above_them(package):
    bad = []
    for path in _modules(package):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "r2ac" and len(parts) > 1 and parts[1] != package and parts[1] not in ALLOWED[package]:
                bad.append(f"{os.path.relpath(path, ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_runtime_internals_are_used_only_inside_runtime():
    bad = []
    for path in _modules():
        if os.path.relpath(path, ROOT).startswith("runtime" + os.sep):
            continue
        for name in _imports(path):
            if name in ("r2ac.runtime.common", "r2ac.runtime.session"):
                bad.append(f"{os.path.relpath(path, ROOT)} imports {name} (use r2ac.runtime)")
    assert not bad, "\n".join(bad)
