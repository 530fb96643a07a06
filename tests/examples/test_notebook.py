"""examples/notebooks/dp_release.ipynb executed headless (nbclient +
ipykernel), on a local classic session and on a local Spark Connect server,
and its Databricks source twin kept in step with it.

Each execution runs in a subprocess whose kernel gets its own environment
(SPARK_REMOTE for Connect); a cell after the parameters cell sets the test's
parameters, as papermill would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "notebooks" / "dp_release.ipynb"
TWIN = REPO / "examples" / "notebooks" / "dp_release_databricks.py"

RUNNER = textwrap.dedent(
    """
    import json, sys
    import nbformat
    from nbclient import NotebookClient

    notebook, workdir, params = sys.argv[1], sys.argv[2], sys.argv[3]
    nb = nbformat.read(notebook, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(params))
    NotebookClient(nb, kernel_name="python3", timeout=900, resources={"metadata": {"path": workdir}}).execute()
    outputs = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            outputs.append({"type": out["output_type"], "text": out.get("text", ""),
                            "html": out.get("data", {}).get("text/html", "")})
    print("RESULT" + json.dumps(outputs))
    """
)


def _execute(tmp_path: Path, remote: bool):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    params = 'ROWS = 6000\nSEED = 5\nOUTPUT_DIR = "out"\n'
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    if remote:
        env["SPARK_REMOTE"] = "local[2]"
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK), str(tmp_path), params],
                          capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def _check(outputs, tmp_path: Path, session_module: str):
    text = "".join(o["text"] for o in outputs)
    assert session_module in text, text[:500]
    assert "distinct-count: ε = 1" in text and "top-k: ε = 1, δ = 1e-06" in text
    assert "NOT private" in text  # the test's seed shows in the summary
    pages = [o["html"] for o in outputs if o["html"]]
    assert len(pages) == 2 and all("<svg" in p for p in pages)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "distinct_count_report.html", "distinct_count_report.json",
        "top_k_items.parquet", "top_k_report.html", "top_k_report.json"]
    report = json.loads((out / "distinct_count_report.json").read_text())
    assert report["release"] == "distinct-count" and report["seeded"] is True
    assert f"{report['result']['lower_bound']:,}" in pages[0]


def test_notebook_on_a_local_session(tmp_path):
    _check(_execute(tmp_path, remote=False), tmp_path, "pyspark.sql.session")


@pytest.mark.connect
def test_notebook_on_spark_connect(tmp_path):
    _check(_execute(tmp_path, remote=True), tmp_path, "pyspark.sql.connect.session")


def test_databricks_twin_has_the_same_cells():
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    text = TWIN.read_text()
    assert text.startswith("# Databricks notebook source\n")
    cells = [c.strip() for c in text[len("# Databricks notebook source\n"):].split("# COMMAND ----------")]
    assert len(cells) == len(nb.cells)
    for cell, source in zip(nb.cells, cells):
        if cell.cell_type == "code":
            assert source == cell.source.strip()
        else:
            lines = [line[len("# MAGIC"):].strip() for line in source.splitlines()]
            assert lines[0] == "%md" and lines[1:] == [l.strip() for l in cell.source.splitlines()]
