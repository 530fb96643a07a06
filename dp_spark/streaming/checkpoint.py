"""Driver-side state of a streaming continual-distinct query, and its sink.

``MechanismCheckpoint`` persists, atomically and as one JSON file, everything
the driver needs to resume: the ``ContinualCounter`` state (tree partial sums,
last noisy node values, the sparse vector's level and threshold noise), the
cumulative sparse-vector query values, the index of the last released step
with the Spark micro-batch id that produced it, that step's released record,
the configuration the budget was spent for, and — only for seeded runs — the
generator state. It is written BEFORE the step's record reaches the sink, so
once a step's noise has been drawn and saved it is never drawn again: a
re-executed micro-batch re-writes the saved record instead.

CONFIDENTIAL: the file holds exact (non-private) partial sums and secret
noise. Store it like the input data; never publish it.

``StepSink`` is the public output: one small JSON file per released step,
written atomically (rewriting a step writes the same record again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dp_spark.errors import InputError, ParameterError
from dp_spark.io import write_json_atomic

KIND = "dp_spark.streaming.continual_distinct"
VERSION = 1
STATE_FILE = "mechanism.json"
ERROR_FILE = "input-error.json"


def local_directory(path: str, name: str) -> Path:
    """A local directory path (``file:`` URIs allowed); other schemes are refused."""
    text = str(path)
    if text.startswith("file:"):
        text = text[len("file:"):]
        while text.startswith("//"):
            text = text[1:]
    if "://" in text:
        raise ParameterError(
            f"{name} must be a local (or shared, mounted) directory for the streaming mode; got {path!r}."
        )
    return Path(text)


class MechanismCheckpoint:
    """The atomically written driver state of one streaming query (confidential)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / STATE_FILE
        self.error_path = self.directory / ERROR_FILE

    def exists(self) -> bool:
        return self.path.is_file()

    def load(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                state = json.load(fh)
        except FileNotFoundError:
            raise InputError(f"no mechanism checkpoint at {str(self.path)!r}.") from None
        except (OSError, ValueError):
            raise InputError(
                f"the mechanism checkpoint {str(self.path)!r} is unreadable; restore it from a backup "
                "(starting over would spend the privacy budget again)."
            ) from None
        if not isinstance(state, dict) or state.get("kind") != KIND or state.get("version") != VERSION:
            raise InputError(f"{str(self.path)!r} is not a continual-distinct checkpoint of this version.")
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` atomically (temporary file, fsync, rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, state)

    # A bad event found inside a micro-batch is reported through a file, so the
    # driver thread sees it even when foreachBatch runs in another process
    # (Spark Connect).
    def record_error(self, message: str) -> None:
        write_json_atomic(self.error_path, {"message": message})

    def take_error(self) -> str | None:
        try:
            with open(self.error_path, encoding="utf-8") as fh:
                message = json.load(fh).get("message")
        except (OSError, ValueError):
            return None
        self.error_path.unlink(missing_ok=True)
        return message


class StepSink:
    """One JSON record per released step: ``step-000000001.json`` (public)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def _path(self, step: int) -> Path:
        return self.directory / f"step-{int(step):09d}.json"

    def write(self, record: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self._path(record["step"]), record)

    def has(self, step: int) -> bool:
        return self._path(step).is_file()

    def read(self) -> list[dict[str, Any]]:
        """All records, by step."""
        if not self.directory.is_dir():
            return []
        records = []
        for path in sorted(self.directory.glob("step-*.json")):
            with open(path, encoding="utf-8") as fh:
                records.append(json.load(fh))
        return sorted(records, key=lambda r: r["step"])
