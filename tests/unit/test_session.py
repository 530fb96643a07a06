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
