"""Sessions dp_spark builds keep Spark's UI and event log off (finding 7):
both show exact, non-private row counts. No JVM is started here, and no
pyspark imported (the builder test is tests/spark/test_session.py)."""

from __future__ import annotations

import logging

import pytest

from dp_spark import session as S
from tests.unit.helpers import FakeSession


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(S.ALLOW_UI_ENV, raising=False)


def test_shipped_defaults_and_fallback_keep_ui_and_event_log_off():
    shipped = S.load_defaults()
    assert shipped["conf"]["spark.ui.enabled"] == "false"
    assert shipped["conf"]["spark.eventLog.enabled"] == "false"
    fallback = S._FALLBACK_DEFAULTS
    assert fallback["conf"]["spark.ui.enabled"] == "false"
    assert fallback["conf"]["spark.eventLog.enabled"] == "false"


def test_private_settings_win_over_defaults_file_and_conf(tmp_path):
    path = tmp_path / "spark-defaults.yaml"
    path.write_text('conf:\n  spark.ui.enabled: "true"\n  spark.eventLog.enabled: "true"\n  spark.x: "1"\n')
    settings = S.load_defaults(path)
    merged = S.session_settings(settings, {"spark.ui.enabled": "true", "spark.eventLog.dir": "/tmp/ev"})
    assert merged["spark.ui.enabled"] == "false"
    assert merged["spark.eventLog.enabled"] == "false"
    assert merged["spark.x"] == "1" and merged["spark.eventLog.dir"] == "/tmp/ev"


@pytest.mark.parametrize("how", ["argument", "env"])
def test_user_can_ask_for_the_ui(tmp_path, monkeypatch, how):
    settings = {"conf": {"spark.ui.enabled": "true", "spark.eventLog.enabled": "true"}}
    if how == "env":
        monkeypatch.setenv(S.ALLOW_UI_ENV, "1")
        merged = S.session_settings(settings)
    else:
        merged = S.session_settings(settings, allow_ui=True)
    assert merged["spark.ui.enabled"] == "true" and merged["spark.eventLog.enabled"] == "true"
    monkeypatch.setenv(S.ALLOW_UI_ENV, "1")
    assert S.session_settings(settings, allow_ui=False)["spark.ui.enabled"] == "false"


def test_existing_session_with_ui_on_is_warned_about(monkeypatch, caplog):
    exposed = FakeSession({"spark.eventLog.enabled": "true"})  # UI defaults to on in Spark
    monkeypatch.setattr(S, "active_session", lambda: exposed)
    with caplog.at_level(logging.WARNING, logger="dp_spark"):
        assert S.get_session() is exposed
    assert "spark.ui.enabled and spark.eventLog.enabled" in caplog.text
    caplog.clear()
    quiet = FakeSession({"spark.ui.enabled": "false"})
    monkeypatch.setattr(S, "active_session", lambda: quiet)
    with caplog.at_level(logging.WARNING, logger="dp_spark"):
        assert S.get_session() is quiet
    assert caplog.text == ""


# -- start-up problems: one line naming the fix, before any JVM starts (issue 22) --


@pytest.fixture
def no_jvm(monkeypatch):
    """get_session must refuse before it would start Spark (and here, in the
    unit tier, before it would import pyspark)."""
    monkeypatch.setattr(S, "active_session", lambda: None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)


@pytest.mark.parametrize("master", ["local[abc]", "local[0]", "local[2", "spark:/h:7077", "yarn-cluster", ""])
def test_a_master_that_is_not_a_spark_url_is_refused_naming_the_forms(no_jvm, master):
    with pytest.raises(S.ParameterError, match="--master"):
        S.get_session(master=master or " ")


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,2]", "local[*,3]",
                                    "local-cluster[2,1,1024]", "spark://127.0.0.1:7077", "sc://localhost:15002",
                                    "yarn", "k8s://https://host:443"])
def test_spark_master_urls_pass(master):
    S.check_master(master)


def test_java_home_pointing_nowhere_is_one_line_naming_the_fix(no_jvm, monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(S.InputError, match="JAVA_HOME is .*nowhere.*has no bin/java; point JAVA_HOME"):
        S.get_session(master="local[1]")


def test_no_java_at_all_names_the_install(no_jvm, monkeypatch):
    import shutil

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(S.InputError, match="no java on PATH"):
        S.check_local_launch()


def test_a_tiny_file_size_limit_is_refused_naming_ulimit(no_jvm, monkeypatch):
    resource = pytest.importorskip("resource")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (4096, resource.RLIM_INFINITY))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: "/usr/bin/java")
    with pytest.raises(S.InputError, match=r"ulimit -f\) is 4 KiB.*ulimit -f unlimited"):
        S.get_session(master="local[1]")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    S.check_local_launch()  # no limit: fine
