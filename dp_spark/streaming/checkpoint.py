"""Driver-side state of a streaming continual-distinct query, and its sink.

``MechanismCheckpoint`` persists atomically, as one JSON file with a SHA-256
checksum, everything the driver needs to resume: the ``ContinualCounter``
state (partial sums, noisy node values, the sparse vector's state), the last
released step with its micro-batch id and record, the configuration the
budget was spent for, and (seeded runs only) the generator state. An edited
or damaged file, which could re-draw released steps, is refused. It is
written BEFORE the step's record reaches the sink, so a step's noise is
never drawn twice.

CONFIDENTIAL: the file holds exact (non-private) partial sums and secret
noise. Store it like the input data; never publish it.

The file is the only record that ρ was spent: if it is lost while Spark's
checkpoint or the sink's step files remain, the query refuses to start a
fresh state (``MechanismCheckpoint.spark_started``, ``StepSink.steps``).

``StepSink`` is the public output: one JSON file per released step, written
atomically; a different record for a released step is refused.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dp_spark.errors import InputError, ParameterError
from dp_spark.io import write_json_atomic
from dp_spark.marking import mark_record

KIND = "dp_spark.streaming.continual_distinct"
VERSION = 3  # of the state file's layout
CHECKSUM = "checksum"
STATE_FILE = "mechanism.json"
ERROR_FILE = "input-error.json"
SPARK_DIR = "spark"
#: The demo source the command line writes inside the checkpoint folder when
#: ``--stream`` has no ``--input`` (one event file per step).
DEMO_DIR = "demo-input"
#: The top of a continual-distinct checkpoint folder (besides hidden temporary files).
LAYOUT = frozenset({STATE_FILE, ERROR_FILE, SPARK_DIR, DEMO_DIR})
#: The top of a Spark Structured Streaming checkpoint (ours holds it under ``spark/``).
SPARK_CHECKPOINT_NAMES = frozenset({"offsets", "commits", "metadata", "sources", "state"})
#: StepSink's file names, allowed at the top when the sink is the checkpoint folder.
STEP_FILES = "step-*.json"
#: The setting Spark takes a stateful query's partitions from at its first start (kept in the offset log).
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


#: Renamed keys of a saved configuration (old -> new), read under the new name by
#: :meth:`MechanismCheckpoint.load` after the checksum is checked on the file as written.
RENAMED_KEYS = {"mechanism": "method"}


def current_keys(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every renamed key (``RENAMED_KEYS``) under its new name."""
    out = dict(config)
    for old, new in RENAMED_KEYS.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def state_checksum(state: dict[str, Any]) -> str:
    """SHA-256 of the state's canonical JSON (sorted keys), the checksum field excluded."""
    body = {k: v for k, v in state.items() if k != CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def refuse_foreign_checkpoint(directory: str | os.PathLike, *, sink=None, source=None) -> None:
    """Refuse (InputError), before anything is read or spent, a checkpoint
    folder holding another query's files: Spark's checkpoint layout at its top,
    or, where no mechanism state is saved, any name outside :data:`LAYOUT`
    (hidden names ignored; the ``sink`` and ``source`` folders may lie inside,
    the sink may be the folder itself). A missing or empty folder and one this
    query wrote are accepted. Reads names only, never contents."""
    directory = Path(directory)
    try:
        names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:  # missing (a new stream), a file or unreadable: refused or reported where it is used
        return
    own, here = set(LAYOUT), _resolved(directory)
    steps_here = False
    for folder in (sink, source):
        path = _resolved(folder)
        if path is None or here is None:
            continue
        if path == here:
            steps_here = steps_here or folder is sink
        elif here in path.parents:
            own.add(path.relative_to(here).parts[0])
    foreign = [n for n in names if n not in own and not (steps_here and fnmatch.fnmatch(n, STEP_FILES))]
    spark_names = [n for n in foreign if n in SPARK_CHECKPOINT_NAMES]
    if STATE_FILE in names:
        foreign = spark_names  # this query's folder: only another query's checkpoint files are refused
    if not foreign:
        return
    shown = ", ".join(n + ("/" if (directory / n).is_dir() else "") for n in foreign[:4])
    shown += f" and {len(foreign) - 4} more" if len(foreign) > 4 else ""
    what = (f"another streaming query's Spark checkpoint ({shown})" if spark_names else
            f"files that are not a continual-distinct checkpoint's ({shown})")
    raise InputError(
        f"the checkpoint folder {str(directory)!r} holds {what}, so it is not this query's checkpoint. Give an "
        "empty or new folder for a new stream, or the folder an earlier run of this query used, to resume. "
        "Nothing was read or spent."
    )


def _resolved(folder) -> Path | None:
    """A local folder's absolute path, or None (not given, or a URI)."""
    if folder is None or "://" in str(folder):
        return None
    try:
        return local_directory(str(folder), "folder").resolve()
    except (OSError, ParameterError, RuntimeError):
        return None


class MechanismCheckpoint:
    """The atomically written driver state of one streaming query (confidential)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / STATE_FILE
        self.error_path = self.directory / ERROR_FILE
        self.spark_path = self.directory / SPARK_DIR

    def exists(self) -> bool:
        """The mechanism state file exists (this checkpoint's ρ was spent)."""
        return self.path.is_file()

    def spark_started(self) -> bool:
        """Spark's own checkpoint (``<checkpoint>/spark``) exists: a query ran here."""
        return self.spark_path.exists()

    def spark_state_partitions(self) -> int | None:
        """The state partitions Spark fixed at the query's first start
        (``spark.sql.shuffle.partitions`` in the offset log, restored on every
        restart), or None when no query started or the log does not say. Public."""
        offsets = self.spark_path / "offsets"
        try:
            batches = sorted((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), reverse=True)
        except OSError:
            return None
        for batch in batches:
            try:
                with open(offsets / str(batch), encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
                value = json.loads(lines[1])["conf"][SHUFFLE_PARTITIONS]
                return int(value)
            except (OSError, ValueError, IndexError, KeyError, TypeError):
                continue  # a log entry being written, or an older layout: try the one before
        return None

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
        if not isinstance(state, dict) or state.get("kind") != KIND:
            raise InputError(f"{str(self.path)!r} is not a continual-distinct checkpoint.")
        if state.get("version") != VERSION:
            raise InputError(
                f"{str(self.path)!r} was written by another version of dp_spark (checkpoint version "
                f"{state.get('version')!r}, this one reads {VERSION}); finish that stream with the version "
                "that created it."
            )
        if state.get(CHECKSUM) != state_checksum(state):
            raise InputError(
                f"the mechanism checkpoint {str(self.path)!r} fails its checksum: it was edited or damaged. "
                "Restore it from a backup; an edited state could re-draw released steps or spend the "
                "budget again, so it is never used."
            )
        state = {k: v for k, v in state.items() if k != CHECKSUM}
        if isinstance(state.get("config"), dict):
            state["config"] = current_keys(state["config"])
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` with its checksum atomically (temporary file, fsync, rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        body = {k: v for k, v in state.items() if k != CHECKSUM}
        write_json_atomic(self.path, {**body, CHECKSUM: state_checksum(body)})

    # an error inside a micro-batch goes through a file: foreachBatch may run in another process
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

    def __init__(self, directory: str | os.PathLike, seeded: bool = False) -> None:
        self.directory = Path(directory)
        self.seeded = seeded  # then every record says "not for publication" (dp_spark.marking)

    def _path(self, step: int) -> Path:
        return self.directory / f"step-{int(step):09d}.json"

    def write(self, record: dict[str, Any]) -> None:
        """Write a step's record atomically. Writing the record already there
        again is a no-op; a DIFFERENT record for a released step is refused
        (InputError): a published step is never re-drawn."""
        record = mark_record(record, self.seeded)
        path = self._path(record["step"])
        existing = self._load(path)
        if existing is not None:
            if existing == json.loads(json.dumps(record)):
                return
            raise InputError(
                f"the sink already holds a different record for step {int(record['step'])} "
                f"({str(path)!r}); a released step is never overwritten. The sink belongs to another "
                "stream, or the mechanism checkpoint was replaced: use the sink this checkpoint wrote to."
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)

    @staticmethod
    def _load(path: Path) -> dict[str, Any] | None:
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            raise InputError(f"the sink record {str(path)!r} is unreadable; restore it from a backup.") from None

    def has(self, step: int) -> bool:
        return self._path(step).is_file()

    def steps(self) -> list[Path]:
        """The step files present (any stream's)."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob("step-*.json"))

    def read(self) -> list[dict[str, Any]]:
        """All records, by step."""
        records = [self._load(path) for path in self.steps()]
        return sorted((r for r in records if r is not None), key=lambda r: r["step"])
