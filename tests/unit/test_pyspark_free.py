"""The mechanism layer (accounting, noise, mechanisms, summaries, checks, the
plan and every release's plan) never imports pyspark: every one of its
modules imports in a fresh interpreter where pyspark cannot be imported."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import dp_spark

REPO = Path(__file__).resolve().parents[2]
MECHANISM_PACKAGES = ("accounting", "noise", "mechanisms", "summaries", "plans", "settings")
MECHANISM_MODULES = ("dp_spark.checks", "dp_spark.plan")

BLOCKER = """
import importlib, sys
from tests.unit.helpers import block_pyspark, pyspark_loaded
block_pyspark()
for name in sys.argv[1:]:
    importlib.import_module(name)
import dp_spark
dp_spark.PrivacyFilter, dp_spark.ZCDP
assert not pyspark_loaded(), "pyspark was imported"
print("ok", len(sys.argv) - 1)
"""


def mechanism_modules() -> list[str]:
    names = list(MECHANISM_MODULES)
    root = Path(dp_spark.__file__).parent
    for package in MECHANISM_PACKAGES:
        names.append(f"dp_spark.{package}")
        for info in pkgutil.walk_packages([str(root / package)], prefix=f"dp_spark.{package}."):
            names.append(info.name)
    return names


def test_mechanism_layer_imports_without_pyspark():
    modules = mechanism_modules()
    assert len(modules) > len(MECHANISM_PACKAGES)  # the walk found the modules
    result = subprocess.run([sys.executable, "-c", BLOCKER, *modules], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"ok {len(modules)}"


def test_the_blocker_catches_a_pyspark_import():
    result = subprocess.run([sys.executable, "-c", BLOCKER, "dp_spark.stages.edges"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "pyspark is blocked" in result.stderr


def test_stages_import_no_mechanism_code():
    """The Spark stage layer never draws privacy noise: no stage module
    imports the mechanism layer or a sampler (they may import summaries)."""
    import ast

    forbidden = ("dp_spark.mechanisms", "dp_spark.noise")
    root = Path(dp_spark.__file__).parent / "stages"
    offenders = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == f or n.startswith(f + ".") for n in names for f in forbidden):
                offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "dp_spark" and any(
                    a.name in ("mechanisms", "noise") for a in node.names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], f"stage modules importing mechanism code: {offenders}"
