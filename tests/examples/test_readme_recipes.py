"""The README's recipes run as written: every recipe line of its bash blocks
in document order, in one folder (the ``dp-spark`` lines in process on the
shared session, ``cd`` honoured, the lines needing another program listed
with the reason they are not run here), its spark-submit line (from the
checkout, venv not activated, with only the variables the line sets), and the
Spark Connect example of the documentation's platforms page (a session of its
own, so run in a subprocess). The docs pages' other blocks and the README's
Python blocks: test_docs_examples.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dp_spark.commands.base import OUTPUT_PATHS
from tests.unit.helpers import run_cli

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
    page = (REPO / "docs" / "platforms.md").read_text()
    section = page[page.index("## Spark Connect"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.connect
def test_spark_connect_example(tmp_path):
    from dp_spark.sample_data import sample_files

    # the example reads the samples folder's events.parquet (dp-spark sample-data), as the page says
    (tmp_path / "events.parquet").write_bytes(next(data for name, data, _ in sample_files()
                                                   if name == "events.parquet"))
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


# -- every recipe, in order (issue 42 §1) -----------------------------------------------------------------

#: The recipe lines this test does not run, each with the reason (another program, or an install). Every
#: other line must be ``cd DIR`` or ``dp-spark ...`` commands (joined by ``&&``), which it runs; a new line
#: of any other kind fails the test until it is made runnable or listed here.
SKIPPED = {
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/dp-spark distinct-count "
    "--output distinct_count_report.json":
        "the install: creates the venv and pip-installs dp_spark from the checkout (a fresh clone's first step)",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q":
        "the install and the whole test suite (.ci/run runs this line verbatim)",
    "PYSPARK_PYTHON=$PWD/.venv/bin/python SPARK_LOCAL_IP=127.0.0.1 .venv/bin/spark-submit --conf "
    "spark.ui.enabled=false jobs/distinct_count.py --config conf/distinct_count.yaml --report-html "
    "distinct_count_job_report.html":
        "spark-submit, a JVM of its own: test_readme_spark_submit_line_runs_at_warn runs it as a subprocess",
    ".venv/bin/pip install -q -e '.[docs]'":
        "pip-installs the documentation tools: .ci/run installs them and builds the site with --strict",
    ".venv/bin/mkdocs serve":
        "a web server that runs until stopped: tests/examples/test_docs_site.py builds the same site",
    ".venv/bin/mkdocs build --strict -d /tmp/dp_spark_site":
        "the documentation build: .ci/run runs it (into a temporary folder) after the tests",
}

#: Flags naming what a recipe writes (checked to exist after it ran): the CLI's output options.
WRITES = tuple("--" + name.replace("_", "-") for name in OUTPUT_PATHS)


def recipe_lines(readme: str) -> list[str]:
    """Every recipe line of the README's ```bash blocks, in document order:
    continuation lines joined, comments and blank lines dropped."""
    lines = []
    for block in re.findall(r"^```bash\n(.*?)^```", readme, re.S | re.M):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                lines.append(line)
    return lines


def _written(argv: list[str]) -> list[str]:
    """The paths a dp-spark command line says it writes."""
    named = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in WRITES]
    named += [word.split("=", 1)[1] for word in argv if word.split("=", 1)[0] in WRITES and "=" in word]
    if argv[:1] == ["sample-data"]:
        named.append(argv[1])
    if argv[:2] == ["ledger", "create"]:
        named.append(argv[2])
    return named


def commands(line: str) -> list[tuple[str, list[str]]]:
    """A recipe line (not in SKIPPED) as the commands this test runs, each
    ("cd", [DIR]) or ("dp-spark", argv); anything else fails the test."""
    out = []
    for command in re.split(r"\s&&\s", line):
        assert not set("|;<>`$&") & set(command), f"recipe {line!r}: a shell construct this test cannot run"
        words = shlex.split(command)
        if words[0] == "cd" and len(words) == 2:
            out.append(("cd", words[1:]))
            continue
        if words[0] == "spark-submit":  # its --conf pairs, then a jobs/ script and the command's flags
            rest = words[1:]
            while rest[:1] == ["--conf"]:
                rest = rest[2:]
            assert rest and Path(rest[0]).parent.name == "jobs" and rest[0].endswith(".py"), (
                f"recipe {line!r}: spark-submit of something other than a jobs/ script, which this test cannot run")
            out.append(("spark-submit", rest))
            continue
        assert words[0] == "dp-spark", (
            f"recipe {line!r} runs {words[0]!r}, which this test cannot run in process: write it with dp-spark "
            "and cd, or add the line to SKIPPED with the reason it is not run")
        out.append(("dp-spark", words[1:]))
    return out


@pytest.mark.parametrize("line", ["pip install dp_spark", ".venv/bin/dp-spark top-k", "dp-spark top-k | head",
                                  "dp-spark sample-data s; cd s", "cd s && airflow dags test x"])
def test_a_recipe_line_it_cannot_run_fails_unless_listed(line):
    with pytest.raises(AssertionError, match="cannot run"):
        commands(line)


@contextlib.contextmanager
def _shell_directory(spark):
    """``cd`` for the in-process commands: the Python process's working
    folder and the JVM's (its local file system resolves relative paths
    against its own working directory, which a Python chdir does not move),
    both put back afterwards (the session is shared)."""
    jvm = spark._jvm
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before_py, before_jvm = os.getcwd(), local.getWorkingDirectory()

    def cd(path: str) -> None:
        os.chdir(path)
        local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(Path.cwd().as_uri()))

    try:
        yield cd
    finally:
        os.chdir(before_py)
        local.setWorkingDirectory(before_jvm)


def test_the_recipe_lines_are_read_in_order():
    lines = recipe_lines(README)
    assert lines[0].startswith("python3 -m venv .venv") and len(lines) >= 12
    assert "dp-spark ledger create budgets.db team-a --rho 1 --delta 1e-5" in lines  # its comment dropped
    joined = [line for line in lines if line.startswith("dp-spark distinct-count --input events.parquet")]
    assert joined and "--epsilon 1" in joined[0]  # a continuation line joined to its first


def run_recipe_line(line: str, capsys, cd) -> list[str]:
    """Run one recipe line (not in SKIPPED) as :func:`commands` reads it, in
    process: each dp-spark command must exit 0 and write what it names (a JSON
    file that parses). Returns the dp-spark commands run."""
    ran = []
    for program, words in commands(line):
        if program == "cd":
            cd(words[0])
            continue
        if program == "spark-submit":  # the job runs `dp-spark <release>` (jobs/_entry.py): in process
            script = Path(words[0])
            assert script.is_file(), f"{line}: {script} does not exist from {os.getcwd()}"
            words = [re.search(r'run\("([a-z-]+)"\)', script.read_text()).group(1), *words[1:]]
        command = shlex.join(["dp-spark", *words])
        code, out, err = run_cli(capsys, *words)
        assert code == 0, f"{command}\n{out[-2000:]}{err[-3000:]}"
        for path in _written(words):
            assert Path(path).exists(), f"{command}: {path} was not written\n{out[-2000:]}"
            if path.endswith(".json"):
                json.loads(Path(path).read_text())
        ran.append(command)
    return ran


def test_every_readme_recipe_runs_in_order_in_one_folder(spark, tmp_path, capsys):
    """From a fresh folder, as a newcomer would after the install: each recipe
    line in document order; the first runnable one writes the sample inputs
    the others read. Each dp-spark command exits 0 and writes what it names."""
    ran, skipped = [], []
    for shipped in ("jobs", "conf"):  # the folder stands in for the checkout the README's recipes start in
        (tmp_path / shipped).symlink_to(REPO / shipped)
    with _shell_directory(spark) as cd:
        cd(str(tmp_path))
        for line in recipe_lines(README):
            if line in SKIPPED:
                skipped.append(line)
                continue
            ran += run_recipe_line(line, capsys, cd)
    for line in skipped:
        print(f"not run ({SKIPPED[line]}): {line}")
    assert sorted(skipped) == sorted(SKIPPED), "a SKIPPED line is no longer in the README: drop it from SKIPPED"
    assert ran[0] == "dp-spark sample-data samples" and len(ran) >= 6
    assert any("--group-by country" in r and "--input" not in r for r in ran)  # per group, on the built-in data
    assert (tmp_path / "samples" / "countries.parquet").is_dir()  # the outputs are in the samples folder


def test_every_recipe_input_is_a_sample_file():
    """Each --input, --domain and --groups a recipe names after the samples
    are written is one of the files sample-data writes."""
    from dp_spark.sample_data import FILES

    written = {f.name for f in FILES}
    lines = recipe_lines(README)
    start = lines.index("dp-spark sample-data samples && cd samples")
    named = set()
    for line in lines[start + 1:]:
        words = shlex.split(line)
        named |= {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--input", "--domain", "--groups")}
    assert named and named <= written, named - written
