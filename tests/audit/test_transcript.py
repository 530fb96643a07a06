"""The transcript is public (issue 35 §1): the structural rule every release obeys.

Everything a release emits before its record — the moment
:func:`dp_spark.ledger.budget.record_release` is called by
:func:`dp_spark.releases.template.run_release` — is a function of the public
parameters and the input's schema only: log records at every level (the
``dp_spark`` logger and the root logger at DEBUG), progress lines (the CLI's
:class:`dp_spark.progress.StepHandler` with ``show_steps``), Spark job
descriptions and every other Spark local property, warnings, the text of an
exception that ends a run, and stdout / stderr. Nothing drawn or private (a
true count, a noisy value, a privately chosen key set or its size, a chosen
cap or bound) may appear there, nor decide whether a line appears: the run
may be interrupted after any line, and what was shown until then must not
depend on the data.

The test runs every release of :data:`dp_spark.releases.RELEASES` (read from
the registry: a release added later is covered with no edit here), every
``method`` its plan's ``Params`` declares (the field's ``choices``), and
every grouping form its ``Params`` has:

- ``ungrouped``;
- ``public-m`` / ``public-auto``: ``group_by`` with public keys ``groups=``
  and ``max_groups`` given (m = 2) or chosen privately (``None``);
- ``private-m`` / ``private-auto``: ``group_by`` without ``groups`` (keys
  chosen privately), m given or chosen privately.

(The ``*-auto`` forms run where ``max_groups=None`` is a private choice, a
"max_groups" step of the plan; elsewhere it only caps nothing.) A few
:data:`VARIANTS` add parameter sets whose private decisions the demo would
not reach otherwise (top-k's auto with a domain, distinct-count's noisy
choice between matching and the greedy).

Each case runs on two neighbouring inputs (the demo table and the table with
one person added who holds many items in every group — for the item-level
continual-distinct, one item's events added, flipping at every other step),
each with two independent noise draws (two seeds), so four transcripts; the
parts before the record must be identical (timings masked, the input path
masked). A case whose plan refuses its parameters (private keys for
continual-distinct or a ρ-zCDP form given ε, a method that has no grouped form) compares the refusal's
text; a case whose plan is built must reach the record in all four runs.
Each release also runs once per neighbour and seed through the command line
(:func:`dp_spark.cli.main` in process, ``--verbose``), its stdout and stderr
compared up to the record.

The private key cases run at ε = :data:`PRIVATE_KEYS_EPSILON`: there the
keys' set-union threshold (9 to 11.4 persons, by δ and m) sits among the demo's group
sizes, so the number of released keys differs between the draws and the
neighbours, as a leak of it would show.
:func:`test_no_released_key_looks_like_any_other_key_set` checks the
private key step's outcome "no key" is not shown either.
:func:`test_the_comparison_catches_a_planted_leak` shows the comparison fails
on a leak (a true count logged at DEBUG).
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import logging
import re
import sys
import warnings

import pandas as pd
import pytest

from dp_spark import cli, progress
from dp_spark.errors import ParameterError
from dp_spark.ledger import budget as ledger_budget
from dp_spark.progress import StepHandler
from dp_spark.releases import RELEASES

#: The two noise draws of every case (seeded, so a failure reproduces; the two draws of the
#: matching+edge_limit variant choose differently: exact matching, then the greedy).
SEEDS = (11, 13)
#: ε of the cases whose keys are chosen privately (module docstring).
PRIVATE_KEYS_EPSILON = 30.0
#: ρ of a (ρ, δ) release's cases whose keys are chosen privately: the key step's ρ/10 puts its threshold
#: (9.3 weight units at m = 2, δ = 10⁻⁶) among the demo's group sizes, as PRIVATE_KEYS_EPSILON does.
PRIVATE_KEYS_RHO = 2.0
#: The groups of the demo tables and the public keys given (one key without rows).
GROUPS = ("a", "b", "c", "d", "e")
PUBLIC_KEYS = [*GROUPS, "z"]
#: m of the forms that give max_groups.
MAX_GROUPS = 2
#: The public domain of the top-k cases that need one (items of the demo table and of the added person).
DOMAIN = [*(f"c{j}" for j in range(6)), *(f"u{p}" for p in range(8)), "n0", "n1", "absent"]

#: What a method needs besides the release's demo parameters (``spec.example``),
#: tried when its plan refuses the demo parameters alone: by parameter name, for
#: every release whose ``Params`` has the field.
NEEDS = {"domain": DOMAIN, "max_items": 3, "max_flippancy": 4}
#: Variants run besides one per method: (release, label, extra parameters, groupings). Top-k's auto
#: with a domain chooses its mechanism privately (at ε = 0.1 its error bound exceeds a tenth of its
#: noisy top count: the warning case); distinct-count's matching with an edge limit at which its
#: noisy pair count (scale 400, margin 5,249; the demo holds about 190 pairs) decides either way;
#: the grouped distinct-count's and the grouped top-k's ρ-zCDP forms (noise="gaussian", per group only;
#: top-k's with a domain, its default one-shot Gumbel and the joint mechanism; keys chosen privately are
#: refused by these ρ-zCDP forms, a refusal compared like any other).
VARIANTS = (("top-k", "auto+domain", {"method": "auto", "domain": DOMAIN}, None),
            ("top-k", "gaussian+domain", {"method": "auto", "domain": DOMAIN, "noise": "gaussian"},
             ("public-m", "public-auto", "private-m")),
            ("top-k", "gaussian+joint", {"method": "joint", "domain": DOMAIN, "noise": "gaussian"}, ("public-m",)),
            ("top-k", "auto+domain+eps0.1", {"method": "auto", "domain": DOMAIN, "epsilon": 0.1}, ("ungrouped",)),
            ("distinct-count", "matching+edge_limit", {"method": "matching", "edge_limit": 5_440}, ("ungrouped",)),
            ("distinct-count", "greedy+gaussian", {"method": "greedy", "noise": "gaussian"},
             ("public-m", "public-auto", "private-m")))

GROUPINGS = ("ungrouped", "public-m", "public-auto", "private-m", "private-auto")


# ------------------------------------------------------------------ the demo tables

def _group_sizes() -> list[int]:
    """Persons per group: 9..13, around the private keys' threshold."""
    return [9, 10, 11, 12, 13]


def persons_table(added: bool) -> pd.DataFrame:
    """person_id, item, g: 55 persons, each in one group; person p holds the
    common items c0..c{p % 6} and one unique item u{p}. ``added``: plus one
    person holding 24 items spread over every group."""
    rows, p = [], 0
    for group, size in zip(GROUPS, _group_sizes()):
        for _ in range(size):
            rows += [(p, f"c{j}", group) for j in range(p % 6 + 1)]
            rows.append((p, f"u{p}", group))
            p += 1
    if added:
        items = [*(f"c{j}" for j in range(6)), *(f"n{j}" for j in range(18))]
        rows += [(1000, item, GROUPS[i % len(GROUPS)]) for i, item in enumerate(items)]
    return pd.DataFrame(rows, columns=["person_id", "item", "g"])


def events_table(added: bool) -> pd.DataFrame:
    """time, item, op, g: 40 items inserted at steps 1..16, every third
    deleted at steps 20..35; an item's group is fixed. ``added``: plus item
    1000, inserted and deleted at every other step of 1..64."""
    rows = []
    for i in range(40):
        group = GROUPS[i % len(GROUPS)]
        rows.append((i % 16 + 1, i, 1, group))
        if i % 3 == 0:
            rows.append((i % 16 + 20, i, -1, group))
    if added:
        rows += [(t, 1000, 1 if t % 4 == 1 else -1, "a") for t in range(1, 65, 2)]
    return pd.DataFrame(rows, columns=["time", "item", "op", "g"])


@pytest.fixture(scope="module")
def tables(spark):
    """{input kind: (demo table, its neighbour)} as cached Spark DataFrames."""
    out = {}
    for kind, make in (("persons", persons_table), ("events", events_table)):
        out[kind] = tuple(spark.createDataFrame(make(added)).cache() for added in (False, True))
    for pair in out.values():
        for frame in pair:
            frame.count()
    yield out
    for pair in out.values():
        for frame in pair:
            frame.unpersist()


# ------------------------------------------------------------------ the cases

def methods(spec) -> tuple:
    """The choices of the ``method`` field of the release's plan ``Params`` ((None,) without one)."""
    for f in dataclasses.fields(spec.plan_function.Params):
        if f.name == "method":
            return tuple(f.metadata.get("choices") or (f.default,))
    return (None,)


def grouping_parameters(spec, grouping: str) -> dict | None:
    """The group parameters of a form; None for a release without them."""
    fields = {f.name for f in dataclasses.fields(spec.plan_function.Params)}
    if grouping == "ungrouped":
        return {}
    if "group_by" not in fields:
        return None
    keys, m = grouping.split("-")
    out = {"group_by": "g", "max_groups": MAX_GROUPS if m == "m" else None}
    if keys == "public":
        out["groups"] = list(PUBLIC_KEYS)
    elif "epsilon" in spec.example.parameters:
        out["epsilon"] = PRIVATE_KEYS_EPSILON
    elif "rho" in spec.example.parameters:  # count-release: its key step is a share of ρ
        out["rho"] = PRIVATE_KEYS_RHO
    return out


def _with_needs(spec, parameters: dict) -> dict:
    """``parameters``, plus what :data:`NEEDS` offers if the plan refuses them alone."""
    try:
        spec.plan(**parameters)
        return parameters
    except ParameterError:
        pass
    fields = {f.name for f in dataclasses.fields(spec.plan_function.Params)}
    for name, value in NEEDS.items():
        if name in fields and name not in parameters:
            try:
                spec.plan(**{**parameters, name: value})
                return {**parameters, name: value}
            except ParameterError:
                continue
    return parameters


def chooses_the_cap(spec, parameters: dict) -> bool:
    """Whether ``max_groups=None`` makes the release choose m privately (its
    plan has a "max_groups" step). A release without that step only caps
    nothing then (set-union, count-release: a public difference of the same
    path), so its ``*-auto`` forms are not run (the budget of this file)."""
    try:
        plan = spec.plan(**{**parameters, **grouping_parameters(spec, "public-auto")})
    except ParameterError:
        return True  # a refusal is compared (cheap)
    return "max_groups" in plan.split


def _cases():
    for spec in RELEASES.values():
        variants = [(m if m is not None else "default", {} if m is None else {"method": m}, None)
                    for m in methods(spec)]
        variants += [(label, extra, forms) for name, label, extra, forms in VARIANTS if name == spec.name]
        for label, extra, forms in variants:
            for grouping in forms or GROUPINGS:
                grouped = grouping_parameters(spec, grouping)
                if grouped is None:
                    continue
                if grouping.endswith("-auto") and not chooses_the_cap(spec, _with_needs(
                        spec, {**spec.example.parameters, **extra})):
                    continue
                yield pytest.param(spec.name, extra, grouping, id=f"{spec.name}-{label}-{grouping}")


CASES = list(_cases())


def case_parameters(name: str, extra: dict, grouping: str) -> dict:
    """The release's keyword parameters of a case: the demo's, the
    variant's, the grouping's, and what the method needs (:data:`NEEDS`),
    looked up on the ungrouped form so every grouping runs the same ones."""
    spec = RELEASES[name]
    base = _with_needs(spec, {**spec.example.parameters, **extra})
    return {**base, **grouping_parameters(spec, grouping)}


# ------------------------------------------------------------------ capturing a run

#: A progress line's timing ("[  1.2s]") and the CLI's input path are not data.
_TIMING = re.compile(r"\[\s*\d+(?:\.\d+)?s\]")


class Transcript:
    """Everything one run emits, in order, and where its record was."""

    def __init__(self, masks=()):
        self.events: list[tuple] = []
        self.cut: int | None = None
        self.masks = tuple(masks)

    def mask(self, text) -> str:
        text = _TIMING.sub("[ t s]", str(text))
        for value, name in self.masks:
            text = text.replace(value, name)
        return text

    def add(self, kind: str, *parts) -> None:
        self.events.append((kind, *(self.mask(p) if isinstance(p, str) else p for p in parts)))

    def before_record(self) -> list[tuple]:
        return self.events if self.cut is None else self.events[:self.cut]

    @property
    def recorded(self) -> bool:
        return self.cut is not None

    def lines(self) -> list[str]:
        out = [" | ".join(map(str, e)) for e in self.before_record()]
        return out + (["-- the record --"] if self.recorded else ["-- no record --"])


class _Capture(logging.Handler):
    def __init__(self, transcript: Transcript):
        super().__init__(logging.DEBUG)
        self.transcript = transcript

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in _WIRE_LOGGERS and record.levelno < logging.WARNING:
            return  # py4j's wire chatter, from any thread (its object finaliser included)
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.transcript.add("log", record.levelname, record.name, text)


class _Stream(io.StringIO):
    """The progress stream: each write is a transcript event."""

    def __init__(self, transcript: Transcript, kind: str):
        super().__init__()
        self.transcript, self.kind = transcript, kind

    def write(self, text: str) -> int:
        if text:
            self.transcript.add(self.kind, text)
        return len(text)


#: Loggers whose DEBUG and INFO are a library's wire chatter, not a release's
#: output (py4j logs every gateway command with its object ids, and its
#: finaliser thread the deletion of Java objects whenever Python collects
#: them); their warnings and errors are captured.
_WIRE_LOGGERS = ("py4j", "py4j.java_gateway", "py4j.clientserver")


@pytest.fixture
def capture(monkeypatch, spark, capfd):
    """``capture(transcript, cli=False)`` -> a context in which every channel
    writes to ``transcript``: the dp_spark logger (the CLI's StepHandler with
    progress lines on, and DEBUG records) and the root logger at DEBUG,
    every SparkContext local property set from Python (job descriptions,
    job groups), warnings, and stdout / stderr up to the record (read at
    the file descriptors: the JVM's output too). The record:
    ``record_release`` wrapped to mark the cut."""
    import contextlib

    from pyspark import SparkContext

    state = {"transcript": None, "warnings": None}

    def current() -> Transcript:
        return state["transcript"]

    def read_fds():
        out, err = capfd.readouterr()
        if current() is not None:
            if out:
                current().add("stdout", out)
            if err:
                current().add("stderr", err)

    def flush_warnings():
        caught = state["warnings"]
        if caught is not None and current() is not None:
            for w in caught:
                current().add("warning", w.category.__name__, str(w.message))
            caught.clear()

    real_record = ledger_budget.record_release

    def marked_record(budget, release):
        read_fds()
        flush_warnings()
        t = current()
        description = SparkContext._active_spark_context.getLocalProperty("spark.job.description")
        if t is not None and t.cut is None:
            # nothing bypassed the capture: the description in force is the last one captured
            set_last = [e for e in t.events if e[0] == "spark property" and e[1] == "spark.job.description"]
            t.add("description in force", description)
            expected = t.mask(set_last[-1][2]) if set_last and set_last[-1][2] is not None else None
            if (t.mask(description) if description is not None else None) != expected:
                t.add("BYPASS", "a job description was set without passing the captured setters")
            t.cut = len(t.events)
        return real_record(budget, release)

    monkeypatch.setattr(ledger_budget, "record_release", marked_record)

    for method in ("setLocalProperty", "setJobDescription", "setJobGroup"):
        real = getattr(SparkContext, method)

        def wrapped(self, *args, _real=real, _method=method, **kwargs):
            if current() is not None:
                if _method == "setLocalProperty":
                    current().add("spark property", str(args[0]), None if args[1] is None else str(args[1]))
                else:
                    current().add(f"spark {_method}", *map(str, args), *map(str, kwargs.values()))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(SparkContext, method, wrapped)

    @contextlib.contextmanager
    def run(transcript: Transcript, cli_run: bool = False):
        dp_logger, root = logging.getLogger("dp_spark"), logging.getLogger()
        saved = [(log, list(log.handlers), log.level, log.propagate)
                 for log in (dp_logger, root, *map(logging.getLogger, _WIRE_LOGGERS))]
        handler = _Capture(transcript)
        if cli_run:  # the CLI attaches its own StepHandler (on stderr, read at the fd); DEBUG captured beside it
            real_configure = cli._configure_logging

            def configure(opts):
                real_configure(opts)
                dp_logger.addHandler(handler)
                dp_logger.setLevel(logging.DEBUG)

            monkeypatch.setattr(cli, "_configure_logging", configure)
        else:  # as the CLI attaches it, with progress lines on
            dp_logger.handlers[:] = [StepHandler(show_steps=True, stream=_Stream(transcript, "progress")), handler]
            dp_logger.setLevel(logging.DEBUG)
            dp_logger.propagate = False
        for name in _WIRE_LOGGERS:  # first: the root at DEBUG must never pass them on
            logging.getLogger(name).setLevel(logging.WARNING)
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
        capfd.readouterr()
        state["transcript"] = transcript
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                state["warnings"] = caught
                try:
                    yield
                except Exception as exc:  # noqa: BLE001 - a refusal's text is part of the transcript
                    transcript.add("raise", type(exc).__name__, str(exc))
                finally:
                    read_fds()
                    flush_warnings()
        finally:
            state["transcript"], state["warnings"] = None, None
            for log, handlers, level, propagate in saved:
                log.handlers[:] = handlers
                log.setLevel(level)
                log.propagate = propagate
            progress.set_job_description(None)

    return run


def transcript_differences(transcripts: dict[str, Transcript]) -> str | None:
    """None when every transcript before its record is the first one's;
    else a readable unified diff of each that differs against the first."""
    (first_name, first), *others = transcripts.items()
    out = []
    for name, t in others:
        if t.lines() != first.lines():
            out += list(difflib.unified_diff(first.lines(), t.lines(), first_name, name, lineterm="", n=2))
    return "\n".join(out) or None


def run_case(capture, tables, name: str, parameters: dict, releases: list | None = None) -> dict[str, Transcript]:
    """The four transcripts of one case: (demo, neighbour) × SEEDS, through
    the Python API; each release returned is appended to ``releases``."""
    spec = RELEASES[name]
    function = spec.function
    out = {}
    for which, table in zip(("demo", "neighbour"), tables[spec.example.input]):
        for seed in SEEDS:
            t = Transcript()
            with capture(t):
                release = function(table, **parameters, seed=seed)
                if releases is not None:
                    releases.append(release)
            out[f"{which}, seed {seed}"] = t
    return out


def _plan_builds(name: str, parameters: dict) -> bool:
    try:
        RELEASES[name].plan(**parameters)
        return True
    except ParameterError:
        return False


# ------------------------------------------------------------------ the rule

@pytest.mark.parametrize("name, extra, grouping", CASES)
def test_the_transcript_before_the_record_is_public(name, extra, grouping, capture, tables):
    parameters = case_parameters(name, extra, grouping)
    releases: list = []
    transcripts = run_case(capture, tables, name, parameters, releases)
    diff = transcript_differences(transcripts)
    assert diff is None, (f"{name} {parameters}: the transcript before the record differs between neighbouring "
                          f"inputs or noise draws (something private is shown before the record):\n{diff}")
    if _plan_builds(name, parameters):  # a case that runs must reach the record: the comparison covered it
        missed = [k for k, t in transcripts.items() if not t.recorded]
        assert not missed, f"{name} {parameters}: no record in {missed}: {transcripts[missed[0]].lines()[-3:]}"
        assert all(any(e[0] == "spark property" for e in t.events) for t in transcripts.values()), \
            "no Spark job description was captured: the capture of job descriptions is not exercised"
        if grouping.startswith("private"):  # the case could show a leak of the key count: it varies
            released = [r.result["group_keys_released"] for r in releases]
            assert len(set(released)) > 1, f"the four runs released {released} keys: the case cannot show their count"
    elif grouping == "ungrouped":
        pytest.fail(f"{name}: the demo parameters {parameters} are refused; add what the method needs to NEEDS")


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_command_line_transcript_before_the_record_is_public(name, capture, tables, tmp_path):
    """The release's demo through ``dp-spark <release> ... --verbose`` in
    process: its stdout and stderr (progress lines included), its logs and
    job descriptions up to the record are the same on both neighbours and
    both seeds (the input path masked)."""
    spec = RELEASES[name]
    inputs = []
    for which, table in zip(("demo", "neighbour"), tables[spec.example.input]):
        path = tmp_path / which / "input.parquet"
        table.drop("g").write.parquet(str(path))
        inputs.append((which, str(path)))
    transcripts = {}
    for which, path in inputs:
        for seed in SEEDS:
            t = Transcript(masks=((path, "<input>"),))
            with capture(t, cli_run=True):
                code = cli.main([name, *spec.example.argv(), "--input", path, "--seed", str(seed), "--verbose"])
            t.add("exit", code)
            assert code == 0, t.lines()
            assert t.recorded, f"{name}: the command line run reached no record"
            transcripts[f"{which}, seed {seed}"] = t
    diff = transcript_differences(transcripts)
    assert diff is None, f"dp-spark {name}: the output before the record differs:\n{diff}"


def test_the_comparison_catches_a_planted_leak(capture, tables, monkeypatch):
    """A true count logged at DEBUG by a monkeypatched stage function (the
    number of persons holding the most common item: 55 on the demo table,
    56 on its neighbour) makes the transcripts differ, and the diff shows the line."""
    from dp_spark.stages import item_counts

    real = item_counts.top_item_counts

    def leaky(edge_df, kbar):
        top = real(edge_df, kbar)
        logging.getLogger("dp_spark.stages.item_counts").debug("top count %d", int(max(top.counts)))
        return top

    monkeypatch.setattr(item_counts, "top_item_counts", leaky)
    transcripts = run_case(capture, tables, "count-release", case_parameters("count-release", {}, "ungrouped"))
    diff = transcript_differences(transcripts)
    assert diff is not None and "-log | DEBUG | dp_spark.stages.item_counts | top count 55" in diff
    assert "+log | DEBUG | dp_spark.stages.item_counts | top count 56" in diff
    assert all(t.recorded for t in transcripts.values())


def _zero_key_cases():
    for spec in RELEASES.values():
        for grouping in ("private-m", "private-auto"):
            grouped = grouping_parameters(spec, grouping)
            if grouped is None or (grouping.endswith("-auto") and not chooses_the_cap(spec, spec.example.parameters)):
                continue
            if _plan_builds(spec.name, {**spec.example.parameters, **grouped}):
                yield pytest.param(spec.name, grouping, id=f"{spec.name}-{grouping}")


@pytest.mark.parametrize("name, grouping", list(_zero_key_cases()))
def test_no_released_key_looks_like_any_other_key_set(name, grouping, capture, tables, monkeypatch):
    """A private key step that releases no key (a drawn outcome) is not
    shown before the record either: the run with the key step's output
    replaced by no key emits what the run with the keys emits (the same
    lines and the same Spark jobs, on the then empty table)."""
    from dp_spark.releases import group_keys

    parameters = case_parameters(name, {}, grouping)
    real = group_keys.choose_keys
    transcripts, releases = {}, []
    for empty in (False, True):
        if empty:
            def no_keys(plan, edge_df, rng):
                _, record, facts = real(plan, edge_df, rng)
                return (), record, {**facts, "group_keys_released": 0}

            monkeypatch.setattr(group_keys, "choose_keys", no_keys)  # run_release imports it at each run
        t = Transcript()
        with capture(t):
            releases.append(RELEASES[name].function(tables["persons"][0], **parameters, seed=SEEDS[0]))
        transcripts["no key released" if empty else "the keys released"] = t
    assert [r.result["groups_released"] > 0 for r in releases] == [True, False]
    diff = transcript_differences(transcripts)
    assert diff is None, f"{name} {parameters}: whether a key was released shows before the record:\n{diff}"


def test_the_cases_cover_every_release_method_and_grouping():
    """The coverage table (printed with ``-s``): releases × methods ×
    groupings, and which cases run to the record (R) or are refused by
    their plan (-)."""
    table: dict[str, dict[str, str]] = {}
    for case in CASES:
        name, extra, grouping = case.values
        label = case.id.removeprefix(f"{name}-").removesuffix(f"-{grouping}")
        runs = _plan_builds(name, case_parameters(name, extra, grouping))
        table.setdefault(f"{name} {label}", {})[grouping] = "R" if runs else "-"
    print(f"\n{'release method':<36}" + "".join(f"{g:>14}" for g in GROUPINGS), file=sys.stderr)
    for row, forms in table.items():
        print(f"{row:<36}" + "".join(f"{forms.get(g, ' '):>14}" for g in GROUPINGS), file=sys.stderr)
    running = sum(v == "R" for forms in table.values() for v in forms.values())
    print(f"{len(CASES)} cases, {running} run to the record", file=sys.stderr)
    assert set(n for n, *_ in (c.values for c in CASES)) == set(RELEASES)
    for name in RELEASES:
        assert all(table[f"{name} {(m or 'default')}"]["ungrouped"] == "R" for m in methods(RELEASES[name]))
