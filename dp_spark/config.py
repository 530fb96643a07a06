"""YAML job configs: the same options as the command line, as a mapping.

A config file holds the options of one release, with the command-line names
written either way (``max_bound`` or ``max-bound``). Options given on the
command line override the file; the release's defaults fill the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dp_spark.errors import InputError, ParameterError


def load_config(path: str | None, allowed: set[str]) -> dict[str, Any]:
    """The options in ``path`` (empty without one). Unknown keys are refused,
    naming the allowed ones, so a typo never silently falls back to a default."""
    if not path:
        return {}
    file = Path(path)
    if not file.is_file():
        raise InputError(f"config file {path!r} does not exist.")
    try:
        with open(file, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"config file {path!r} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InputError(f"config file {path!r} must hold a mapping of option: value.")
    options = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ParameterError(
            f"unknown option {unknown[0]!r} in {path}; allowed: {', '.join(sorted(allowed))}."
        )
    return options
