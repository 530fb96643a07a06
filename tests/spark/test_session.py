"""get_session builds new sessions with Spark's UI and event log off
(finding 7): both show exact, non-private row counts. pyspark's builder is
replaced by a recording stand-in: no JVM is started."""

from __future__ import annotations

from dp_spark import session as S
from tests.unit.helpers import FakeSession


def test_get_session_builds_with_ui_and_event_log_off(monkeypatch):
    """get_session hands the private settings to the builder (a recording stand-in)."""
    seen = {}

    class Builder:
        def master(self, m):
            seen["master"] = m
            return self

        def appName(self, name):  # noqa: N802 - pyspark's name
            return self

        def config(self, key, value):
            seen[key] = value
            return self

        def getOrCreate(self):  # noqa: N802
            return FakeSession({})

    import pyspark.sql

    monkeypatch.delenv(S.ALLOW_UI_ENV, raising=False)
    monkeypatch.setattr(S, "active_session", lambda: None)
    monkeypatch.setattr(S, "launched_externally", lambda: False)
    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Builder())
    S.get_session(master="local[1]", conf={"spark.ui.enabled": "true"})
    assert seen["spark.ui.enabled"] == "false" and seen["spark.eventLog.enabled"] == "false"
