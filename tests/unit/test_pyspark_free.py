"""The mechanism layer never imports pyspark: every mechanism module imports
in a fresh interpreter where pyspark cannot be imported at all."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import dp_spark

REPO = Path(__file__).resolve().parents[2]
MECHANISM_PACKAGES = ("accounting", "noise", "selection", "partition_selection", "pcr", "continual")

BLOCKER = """
import importlib, importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
import dp_spark
dp_spark.PrivacyFilter, dp_spark.ZCDP
assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules), "pyspark was imported"
print("ok", len(sys.argv) - 1)
"""


def mechanism_modules() -> list[str]:
    names = []
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
