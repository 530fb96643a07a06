"""Smoke test of benchmarks/jvm_kernel_speed.py (issue 26): the benchmark-only
JVM greedy kernel gives the same counts and round table as the Python kernel
on a small table, at one shard and at a shard count the partitions do not
divide. Runs the script in its own process (the jar must be on the class
path before the JVM starts); skipped without ``javac``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("javac") is None, reason="javac is not installed")
def test_jvm_kernel_matches_python_kernel(tmp_path):
    out = tmp_path / "checks.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.jvm_kernel_speed", "--rows", "20000", "--check-only",
         "--check-shards", "7", "--shape", "shuffle8", "--tmp", str(tmp_path), "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    checks = json.loads(out.read_text())["runs"][0]["checks"]
    assert [c["shards"] for c in checks] == [1, 7]
    for c in checks:
        assert c["counts_equal"] and c["round_tables_equal"]
        assert c["python_c1_cL"][0] > 0 and c["python_c1_cL"] == c["jvm_c1_cL"]
