"""The README's recipes run as written: its spark-submit line (from the
checkout, venv not activated, with only the variables the line sets) and its
Spark Connect example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _clean_env() -> dict[str, str]:
    """The environment of a fresh shell: no venv, no Spark or PySpark variables."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def test_readme_spark_submit_line_runs_at_warn(tmp_path):
    lines = [l for l in README.splitlines() if ".venv/bin/spark-submit " in l and "jobs/" in l
             and not l.startswith(" ")]
    assert len(lines) == 1, lines
    if not (REPO / ".venv" / "bin" / "spark-submit").is_file():
        pytest.skip("no .venv/bin/spark-submit in the checkout (the README's install command makes it)")
    # The line as written, its HTML report outside the checkout (a flag is given once), a small table.
    html = _flag_value(lines[0], "--report-html")
    line = lines[0].replace(f"--report-html {html}", f"--report-html {tmp_path}/r.html")
    extra = f" --rows 20000 --max-bound 20 --output {tmp_path}/r.json"
    proc = subprocess.run(["bash", "-c", line + extra], cwd=REPO, env=_clean_env(), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "lower_bound" in proc.stdout and (tmp_path / "r.json").is_file() and (tmp_path / "r.html").is_file()
    info = [l for l in proc.stderr.splitlines() if " INFO " in l]
    assert len(info) <= 5 and len(proc.stderr.splitlines()) <= 12, proc.stderr  # ~44 INFO lines before
    # issue 42 §1: the recipe triggered dp_spark's own warning that the Spark UI shows exact counts
    assert "shows exact (non-private) row counts" not in proc.stderr, proc.stderr


def _connect_example() -> str:
    section = README[README.index("**Spark Connect.**"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.connect
def test_readme_spark_connect_example(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(p, f"w{(p * 7 + k) % 40}") for p in range(80) for k in range(p % 5 + 1)]
    pq.write_table(pa.table({"person_id": [r[0] for r in rows], "item": [r[1] for r in rows]}),
                   tmp_path / "events.parquet")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, "-c", _connect_example()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.startswith("distinct-count: ε = 1") and "lower_bound" in proc.stdout
    assert "<svg" in (tmp_path / "distinct_count_report.html").read_text()


def _flag_value(line: str, flag: str) -> str | None:
    words = line.split()
    return words[words.index(flag) + 1] if flag in words else None


def test_readme_spark_submit_line_right_after_the_first_command_writes_other_files():
    """The first command's report is not what the spark-submit recipe (with
    conf/distinct_count.yaml) writes: it would be refused as existing."""
    from dp_spark.config import load_config

    first = next(l for l in README.splitlines() if "dp-spark distinct-count" in l and l.startswith("python3"))
    recipe = next(l for l in README.splitlines() if ".venv/bin/spark-submit " in l and "jobs/" in l
                  and not l.startswith(" "))
    written_first = {_flag_value(first, "--output"), _flag_value(first, "--report-html")} - {None}
    conf = load_config(str(REPO / _flag_value(recipe, "--config")), {"output", "report_html", "rows", "person_col",
                       "item_col", "tokenize", "epsilon", "beta", "max_bound", "method", "edge_limit"})
    written_recipe = {_flag_value(recipe, "--output") or conf.get("output"),
                      _flag_value(recipe, "--report-html") or conf.get("report_html")} - {None}
    assert written_first and written_recipe and not (written_first & written_recipe)


def test_the_checkout_ignores_what_the_readme_and_conf_write():
    names = ["distinct_count_report.json", "distinct_count_job_report.html", "set_union_items.parquet",
             "top_k_items.parquet", "count_release_items.parquet", "continual_distinct_series.parquet",
             "budgets.db", "continual_checkpoint/x", "continual_stream_steps/step-1.json"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(names)


def test_under_spark_submit_an_error_goes_to_stderr(tmp_path):
    """spark-submit merges its Python driver's stderr into stdout; the entry
    script points it back at spark-submit's stderr."""
    submit = REPO / ".venv" / "bin" / "spark-submit"
    if not submit.is_file():
        submit = Path(sys.executable).parent / "spark-submit"
    if not submit.is_file():
        pytest.skip("no spark-submit beside the test's Python")
    env = {**_clean_env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([str(submit), str(REPO / "jobs" / "distinct_count.py"), "--epsilon", "0",
                           "--output", str(tmp_path / "r.json")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert "dp-spark: error: epsilon must be a positive finite number" in proc.stderr
