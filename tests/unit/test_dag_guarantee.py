"""The example Airflow DAG states the combined guarantee of one day's tasks on
the same data: recomputed here from the shipped conf/ files, so the
docstring cannot drift from the configs it describes. The DAG itself imports
Airflow, so its docstring and settings are read with ``ast`` (no import)."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from dp_spark.accounting import ApproxDP, PureDP, ZCDP, compose

REPO = Path(__file__).resolve().parents[2]
DAG = REPO / "examples" / "airflow" / "dp_release_dag.py"


def _conf(name: str) -> dict:
    return yaml.safe_load((REPO / "conf" / f"{name}.yaml").read_text())


def _module() -> ast.Module:
    return ast.parse(DAG.read_text())


def test_docstring_states_the_person_level_total_of_the_shipped_configs():
    dc, su, tk, cr = (_conf(n) for n in ("distinct_count", "set_union", "top_k", "count_release"))
    delta_prime = 1e-6
    total = compose([
        PureDP(dc["epsilon"]),
        ApproxDP(su["epsilon"], su["delta"]),
        ApproxDP(tk["epsilon"], tk["delta"]),
        ZCDP(cr["rho"], cr["delta"]).to_approx(delta_prime),
    ])
    doc = ast.get_docstring(_module())
    delta = f"{total.delta:g}".replace("e-0", "e-")
    stated = f"(ε = {total.epsilon:.3f}, δ = {delta})-DP per day"
    assert stated in " ".join(doc.split()), total.describe()


def test_docstring_states_the_item_level_series_apart():
    cd = _conf("continual_distinct")
    doc = ast.get_docstring(_module())
    assert f"continual-distinct's series is ρ = {cd['rho']:g} zCDP" in doc
    assert "not added to the person-level" in doc


def test_jobs_run_without_the_spark_web_ui():
    tree = _module()
    conf_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "spark_conf")
    namespace: dict = {"PYTHON": None}
    exec(compile(ast.Module(body=[conf_fn], type_ignores=[]), str(DAG), "exec"), namespace)
    assert namespace["spark_conf"]()["spark.ui.enabled"] == "false"
