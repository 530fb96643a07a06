"""examples/airflow/dp_release_dag.py under Airflow itself.

Airflow comes from the optional extra ``.[airflow]`` (apache-airflow and the
Spark provider), installed into a SEPARATE venv that the test creates (and
reuses: ``.venv/airflow`` beside the project venv, or
``$DP_SPARK_AIRFLOW_VENV``). It cannot share the project's venv: the Spark
provider requires ``pyspark-client`` (newest 4.2.0), whose files overwrite
pyspark 4.3's own Python package, after which every pandas UDF fails on
classic Spark (``Constructor ...UserDefinedPythonFunction(...) does not
exist``). The test skips, printing why, only when that install fails.

Airflow runs in a subprocess of that venv with its own AIRFLOW_HOME. It loads
the DAG folder with Airflow's DagBag (no import errors), reports every task's
operator, dependencies and templated arguments, renders one task's
templates for a run and executes that task: SparkSubmitOperator runs the
project venv's spark-submit (first on PATH) against local[2].
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "dp_spark_daily_releases"
def _tasks() -> list[str]:
    """The DAG's tasks: one per release of the registry with a config (the
    input it reads in production), in the registry's order."""
    from dp_spark.releases import RELEASES

    return [spec.python_name for spec in RELEASES.values() if (REPO / "conf" / f"{spec.python_name}.yaml").is_file()]


TASKS = _tasks()
AIRFLOW_IMPORT = "import airflow.providers.apache.spark.operators.spark_submit"


def test_the_dag_runs_every_release():
    """One task per entry of dp_spark.releases.RELEASES with a config (a
    release without one would read the built-in table and still charge the
    production ledger), each job script present, the zCDP releases on the zCDP
    budget (read from the DAG without Airflow: its task table imports only
    the registry)."""
    import ast

    from dp_spark.releases import RELEASES

    source = (REPO / "examples" / "airflow" / "dp_release_dag.py").read_text()
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.Assign, ast.AnnAssign))
            and (not isinstance(n, ast.FunctionDef) or n.name in ("_registry", "_job"))
            and "SparkSubmitOperator" not in ast.unparse(n)]
    namespace = {"__file__": str(REPO / "examples" / "airflow" / "dp_release_dag.py"), "os": os, "Path": Path}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "dag", "exec"), namespace)
    assert TASKS and list(namespace["RELEASES"]) == TASKS
    assert set(namespace["ZCDP_RELEASES"]) == {"count_release", "continual_distinct"}
    for task_id, ((script, first), outputs, _) in namespace["RELEASES"].items():
        spec = RELEASES[task_id.replace("_", "-")]
        own = REPO / "jobs" / f"{task_id}.py"
        assert Path(script) == (own if own.is_file() else REPO / "jobs" / "release.py") and Path(script).is_file()
        conf = REPO / "conf" / f"{task_id}.yaml"
        assert first == ([] if own.is_file() else [spec.name]) + ["--config", str(conf)] and conf.is_file()
        assert set(outputs) == {namespace["ARTIFACT_FLAGS"][a] for a in spec.artifacts}


def _airflow_venv() -> Path:
    default = Path(sys.executable).parent.parent / "airflow"
    return Path(os.environ.get("DP_SPARK_AIRFLOW_VENV", default))


def _importable(python: Path, env) -> bool:
    if not python.is_file():
        return False
    return subprocess.run([str(python), "-c", AIRFLOW_IMPORT], capture_output=True, env=env,
                          timeout=300).returncode == 0


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    """(the Airflow venv's python, an environment for it)."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("VIRTUAL_ENV", None)
    venv = _airflow_venv()
    python = venv / "bin" / "python"
    if not _importable(python, env):
        steps = [[sys.executable, "-m", "venv", str(venv)],
                 # no byte-compiling of the ~100 packages at install (measured: 36.6 -> 30.5 s): Python compiles
                 # only the modules Airflow imports, when it imports them
                 [str(python), "-m", "pip", "install", "-q", "--no-compile", f"{REPO}[airflow]"]]
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
            if proc.returncode != 0:
                break
        if proc.returncode != 0 or not _importable(python, env):
            reason = f"the [airflow] extra could not be installed in {venv}: {proc.stderr.strip()[-600:]}"
            print(reason, file=sys.stderr)
            pytest.skip(reason)
    return python, env


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from airflow.dag_processing.dagbag import DagBag

    folder, task_id, strip_ledger, execute = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
    bag = DagBag(dag_folder=folder, safe_mode=False)
    out = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dags)}
    dag = bag.dags["%s"]
    out["schedule"] = str(getattr(dag, "schedule", None) or getattr(dag, "timetable", None))
    out["tasks"] = {
        t.task_id: {"operator": type(t).__name__, "application": t.application,
                    "args": list(t.application_args), "conf": dict(t.conf or {}),
                    "upstream": sorted(t.upstream_task_ids), "trigger_rule": str(t.trigger_rule)}
        for t in dag.tasks
    }
    task = dag.get_task(task_id)
    context = {"ds": "2026-11-23", "run_id": "scheduled__2026-11-23T00:00:00+00:00", "dag": dag, "task": task}
    task.render_template_fields(context)
    if strip_ledger:  # this checkout's CLI predates the ledger flags
        args, kept = list(task.application_args), []
        while args:
            a = args.pop(0)
            if a in ("--ledger", "--ledger-budget", "--run-key"):
                args.pop(0)
            else:
                kept.append(a)
        task.application_args = kept
    out["rendered"] = list(task.application_args)
    out["command"] = task._get_hook()._build_spark_submit_command(task.application)
    if execute:
        task.execute(context)  # raises if spark-submit exits non-zero
        out["executed"] = True
    print("RESULT" + json.dumps(out))
    """ % DAG_ID
)


def _cli_supports_ledger() -> bool:
    from dp_spark.cli import build_parser

    _, unknown = build_parser().parse_known_args(["distinct-count", "--ledger", "x", "--ledger-budget", "y"])
    return not unknown


def _small_home(tmp_path: Path) -> Path:
    """A DP_SPARK_HOME with the real jobs/ and the real conf/ made small
    (20,000 synthetic rows) so the executed task takes seconds."""
    home = tmp_path / "dp_spark_home"
    (home / "conf").mkdir(parents=True)
    (home / "jobs").symlink_to(REPO / "jobs")
    for path in (REPO / "conf").glob("*.yaml"):
        conf = yaml.safe_load(path.read_text()) or {}
        if "rows" in conf:
            conf["rows"] = 20_000
        if "max_bound" in conf:
            conf["max_bound"] = 20
        (home / "conf" / path.name).write_text(yaml.safe_dump(conf))
    return home


def _run(airflow, env, *args, timeout=900):
    proc = subprocess.run([str(airflow), "-c", SCRIPT, str(REPO / "examples" / "airflow"), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line[len("RESULT"):]), proc


def test_dagbag_loads_the_dag_with_one_spark_submit_per_release(airflow_env, tmp_path):
    airflow, base = airflow_env
    out_dir = tmp_path / "out"
    env = {**base, "DP_SPARK_HOME": str(REPO), "DP_SPARK_OUT": str(out_dir),
           "AIRFLOW_CONN_DP_SPARK_TEST": '{"conn_type": "spark", "host": "local[2]"}',
           "DP_SPARK_CONN_ID": "dp_spark_test"}
    result, _ = _run(airflow, env, "top_k", "0", "0")
    assert result["import_errors"] == {} and result["dags"] == [DAG_ID]
    assert "@daily" in result["schedule"] or "daily" in result["schedule"].lower()
    tasks = result["tasks"]
    assert sorted(tasks) == sorted(TASKS)
    for i, task_id in enumerate(TASKS):
        task = tasks[task_id]
        assert task["operator"] == "SparkSubmitOperator"
        own = REPO / "jobs" / f"{task_id}.py"
        assert task["application"] == str(own if own.is_file() else REPO / "jobs" / "release.py")
        assert Path(task["application"]).is_file()
        args = task["args"]
        assert args[args.index("--config") + 1] == str(REPO / "conf" / f"{task_id}.yaml")
        assert args[args.index("--ledger") + 1] == str(out_dir / "ledger.db")
        zcdp = task_id in ("count_release", "continual_distinct")
        assert args[args.index("--ledger-budget") + 1] == ("daily-zcdp" if zcdp else "daily")
        assert args[args.index("--run-key") + 1] == f"{{{{ dag.dag_id }}}}/{{{{ run_id }}}}/{task_id}"
        assert args[args.index("--output") + 1] == f"{out_dir}/{{{{ ds }}}}/{task_id}_report.json"
        assert task["upstream"] == ([TASKS[i - 1]] if i else []) and "all_done" in task["trigger_rule"].lower()
    rendered = result["rendered"]
    assert rendered[rendered.index("--run-key") + 1] == \
        f"{DAG_ID}/scheduled__2026-11-23T00:00:00+00:00/top_k"
    assert rendered[rendered.index("--items-output") + 1] == f"{out_dir}/2026-11-23/top_k_items.parquet"
    command = result["command"]
    assert command[:3] == ["spark-submit", "--master", "local[2]"]
    assert command[command.index(str(REPO / "jobs" / "top_k.py")) + 1:] == rendered


def test_one_task_runs_for_real_on_local_spark(airflow_env, tmp_path):
    airflow, base = airflow_env
    home, out_dir = _small_home(tmp_path), tmp_path / "out"
    ledger = _cli_supports_ledger()
    venv_bin = str(Path(sys.executable).parent)
    env = {**base, "DP_SPARK_HOME": str(home), "DP_SPARK_OUT": str(out_dir),
           "DP_SPARK_PYTHON": sys.executable, "PATH": f"{venv_bin}{os.pathsep}{base['PATH']}",
           "AIRFLOW_CONN_DP_SPARK_TEST": '{"conn_type": "spark", "host": "local[2]"}',
           "DP_SPARK_CONN_ID": "dp_spark_test", "SPARK_LOCAL_IP": "127.0.0.1"}
    if ledger:
        out_dir.mkdir()
        for budget in (["daily", "--epsilon", "10", "--delta", "1e-5"], ["daily-zcdp", "--rho", "2", "--delta", "1e-5"]):
            made = subprocess.run([str(Path(venv_bin) / "dp-spark"), "ledger", "create", str(out_dir / "ledger.db"),
                                   *budget], capture_output=True, text=True, env=env, timeout=120)
            assert made.returncode == 0, made.stderr
    else:
        print("this CLI has no --ledger yet: the task runs without its three ledger flags", file=sys.stderr)
    result, proc = _run(airflow, env, "distinct_count", "0" if ledger else "1", "1")
    assert result.get("executed"), proc.stderr[-3000:]
    report = json.loads((out_dir / "2026-11-23" / "distinct_count_report.json").read_text())
    assert report["release"] == "distinct-count" and report["privacy"]["epsilon"] == 1.0 and report["seeded"] is False
    page = (out_dir / "2026-11-23" / "distinct_count_report.html").read_text()
    assert "<svg" in page and f"{report['result']['lower_bound']:,}" in page
    if ledger:  # the run was charged to the (ε, δ) budget, under its run key
        shown = subprocess.run([str(Path(venv_bin) / "dp-spark"), "ledger", "history", str(out_dir / "ledger.db")],
                               capture_output=True, text=True, env=env, timeout=120)
        assert shown.returncode == 0 and "distinct-count" in shown.stdout, shown.stdout + shown.stderr
