"""docker/docker-compose.yml runs what the cluster tier (tests/cluster) runs.

There is no Docker engine on the project machines, so the compose file is
never started here; this keeps its commands equal to the tested ones: the
same daemon classes and resources, the same spark-submit options and job
arguments (host names, output paths and the test's --seed aside).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.cluster import conftest as cluster
from tests.cluster import test_standalone as standalone

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker" / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _flags(args, *names):
    return {n: args[args.index(n) + 1] for n in names}


def test_daemons_match_the_cluster_fixture():
    source = (REPO / "tests" / "cluster" / "conftest.py").read_text()
    master = SERVICES["master"]["command"]
    assert master[:2] == ["spark-class", cluster.MASTER]
    assert _flags(master, "--host", "--port")["--host"] == "master"
    for name in ("worker-1", "worker-2"):
        worker = SERVICES[name]["command"]
        assert worker[:2] == ["spark-class", cluster.WORKER] and worker[-1] == "spark://master:7077"
        flags = _flags(worker, "--cores", "--memory")
        assert f'"--cores", "{flags["--cores"]}", "--memory", "{flags["--memory"]}"' in source


def test_job_is_the_cluster_tiers_spark_submit():
    job = SERVICES["job"]["command"]
    assert job[:3] == ["spark-submit", "--master", "spark://master:7077"]
    rest = job[3:]
    script = rest.index(standalone.JOB[0])
    options, arguments = rest[:script], rest[script:]
    at = options.index("spark.driver.host=job")  # the container's own host name
    del options[at - 1: at + 1]
    assert options == list(standalone.SUBMIT_OPTS)
    assert arguments[: len(standalone.JOB)] == list(standalone.JOB)
    tested = (REPO / "tests" / "cluster" / "test_standalone.py").read_text()
    rows = _flags(arguments, "--rows")["--rows"]
    assert re.search(rf'"--rows", "{rows}"', tested)
    outputs = _flags(arguments, "--output", "--report-html")
    assert all(v.startswith("/out/") for v in outputs.values())
    assert "./out:/out" in SERVICES["job"]["volumes"]


def test_readme_says_how_to_run_it_and_that_it_is_untested_here():
    readme = (REPO / "docker" / "README.md").read_text()
    assert "docker compose -f docker/docker-compose.yml up --build --abort-on-container-exit job" in readme
    assert "Not tested here" in readme
