"""Checks on the paths a run reads and writes, made before Spark starts.

Nothing is ever lost: an output that exists is replaced only with
``--overwrite``; no output may be, contain, or lie inside an input (whatever
the flags); two outputs may not share a path; and every output's folder must
accept a new file (a temporary file is created and removed there), so an
unwritable output is found before any data is read or any budget spent.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dp_spark.commands.base import INPUT_PATHS, OUTPUT_PATHS, STATE_PATHS
from dp_spark.errors import InputError


def _local_path(value) -> Path | None:
    """The resolved local path of an option value, or None (tables, object stores)."""
    from dp_spark.io import _is_local, _local

    if not value or not isinstance(value, str) or value.startswith("table:") or not _is_local(value):
        return None
    return Path(os.path.abspath(os.path.expanduser(str(_local(value))))).resolve()


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def run_paths(module, opts) -> tuple[dict, dict, dict]:
    """(outputs, inputs, states): option name -> resolved local path."""
    outputs = {n: _local_path(opts.get(n)) for n in OUTPUT_PATHS}
    series_path = getattr(module, "series_path", None)  # continual-distinct's derived default
    if series_path is not None and not opts.get("series"):
        outputs["series"] = _local_path(series_path(opts))
    inputs = {n: _local_path(opts.get(n)) for n in INPUT_PATHS}
    if opts.get("input") and opts.get("format") == "table":
        inputs["input"] = None
    states = {n: _local_path(opts.get(n)) for n in STATE_PATHS} if opts.get("stream") else {}
    drop = lambda d: {k: v for k, v in d.items() if v is not None}  # noqa: E731
    return drop(outputs), drop(inputs), drop(states)


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def check_run_paths(module, opts) -> None:
    """Refuse (InputError, exit 2) any output that would lose data or cannot be written."""
    outputs, inputs, states = run_paths(module, opts)
    for out_name, out in outputs.items():
        for in_name, src in {**inputs, **states}.items():
            if _overlap(out, src):
                raise InputError(
                    f"{_flag(out_name)} {str(out)!r} is, contains or lies inside {_flag(in_name)} "
                    f"{str(src)!r}; writing it would destroy that {'input' if in_name in inputs else 'state'}. "
                    "Choose another output path (--overwrite never allows this)."
                )
    names = list(outputs)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if _overlap(outputs[first], outputs[second]):
                raise InputError(
                    f"{_flag(first)} and {_flag(second)} point to the same place ({str(outputs[first])!r}); "
                    "give each output its own path."
                )
    for state_name, state in states.items():
        src = inputs.get("input")
        if src is not None and _overlap(state, src):
            raise InputError(
                f"{_flag(state_name)} {str(state)!r} overlaps --input {str(src)!r}; keep the stream's "
                "state and records outside its source."
            )
    for name, out in outputs.items():
        if out.exists() and not opts.get("overwrite"):
            raise InputError(
                f"{_flag(name)} {str(out)!r} already exists; pass --overwrite to replace it, or choose "
                "another path."
            )
        check_writable(out, name)


def check_writable(target: Path, name: str) -> None:
    """Create and remove a temporary file where ``target`` will be written."""
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{_flag(name)} {str(target)!r} cannot be written: {str(folder)!r} is a file.")
    if target.exists() and target.is_dir() and name == "output":
        raise InputError(f"--output {str(target)!r} is a directory; give a file path for the JSON report.")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dp_spark_write_check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(
            f"{_flag(name)} {str(target)!r} cannot be written ({exc.strerror or type(exc).__name__} in "
            f"{str(folder)!r}); choose a writable location."
        ) from None
