"""A resumed stream must repeat the options its checkpoint was created with
(``dp_spark.streaming.query._check_same_config``): keys older checkpoints lack
take the value those versions ran with."""

from __future__ import annotations

import pytest

from dp_spark.errors import ParameterError
from dp_spark.streaming.query import _CONFIG_KEYS, _check_same_config


def _config(method: str, **overrides) -> dict:
    config = {key: f"same {key}" for key in _CONFIG_KEYS}
    config.update(method=method, counter="tree", level_counter="best" if method in ("auto", "adaptive") else None)
    config.update(overrides)
    return config


@pytest.mark.parametrize("method", ["auto", "adaptive"])
def test_an_auto_or_adaptive_checkpoint_from_before_level_counters_is_refused(method):
    """Its plan ran trees at every level; the current plan may start BLT levels and split ρ
    otherwise, so resuming it would mix two plans: refused, naming why."""
    old = _config(method)
    del old["level_counter"]
    with pytest.raises(ParameterError, match="level_counter = None .*binary trees only"):
        _check_same_config(old, _config(method))
    _check_same_config(_config(method), _config(method))  # a current checkpoint resumes


@pytest.mark.parametrize("method", ["bounded", "baseline"])
def test_other_methods_resume_from_checkpoints_without_the_key(method):
    old = _config(method)
    del old["level_counter"], old["counter"]
    _check_same_config(old, _config(method))
