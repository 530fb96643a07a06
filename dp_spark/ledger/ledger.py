"""A persisted privacy-budget ledger: named budgets and every charge against them.

A budget is a total guarantee (``PureDP``, ``ApproxDP`` or ``ZCDP``). A charge is recorded, under a lock on
its budget, before the release reads any data, and only if the composed total still fits; it is never
refunded (a crashed run keeps its charge). Composition is basic composition in the budget's kind
(``dp_spark.accounting.convert_cost``): ε adds for a pure budget; ε and δ add for an (ε, δ) budget (pure ε
counted as (ε, 0)); ρ and δ add for a zCDP budget (pure ε counted as ρ = ε²/2, Bun–Steinke 2016, Proposition
1.4). Summing per component is valid for adaptively chosen charges (a privacy filter:
Rogers–Roth–Ullman–Vadhan 2016 for (ε, δ); Whitehouse–Ramdas–Rogers–Wu 2023 for zCDP). (ε, δ) charges cannot
enter a zCDP budget, nor zCDP charges an (ε, δ) budget without a chosen δ': both are refused.

Amounts count as the decimals written, summed exactly (0.9 then 0.1 fit a budget of 1), through the
functions of the in-memory :class:`~dp_spark.accounting.PrivacyFilter`
(:func:`dp_spark.accounting.filter.amounts`, ``fits``), so the two accept and refuse alike. A charge row
stores them as decimal text under ``"exact"`` in its ``counted`` JSON, beside the floats; a row without that
key counts at the exact binary values of its floats (what its release ran at).

Run keys: a charge made with a run key (e.g. an Airflow run id) belongs to one release with one parameter
set and one input (its *identity*, recorded in ``dp_runs``; for a grouped release or a public domain it also
holds the digest of the public keys and domain the release read). A keyed run is 'charged' when its charge
is recorded (before the data is read), 'drawn' just before its first privacy draw (its own committed
transaction: :meth:`Ledger.mark_drawn`), 'released' when its Release is recorded. A retry under the key:

- with another identity is refused (ParameterError naming the earlier run);
- while the run is 'charged' (it drew nothing) reuses the charge and runs again;
- once it is 'drawn' and not 'released' is refused: what it drew may have been seen, and a second draw under
  the same charge would be a second release; a new run key is needed and the charge stays;
- once it is 'released' (recorded in one transaction before the Release was returned, printed or written)
  gets the recorded Release back unchanged: no data is read and no noise drawn. Averaging many runs under
  one key therefore learns nothing more than one run: every charge draws at most once.

Two processes racing on one key: both may reuse a 'charged' run; the first to mark it 'drawn' draws, the
other is refused at its mark (before drawing) or, when the first has recorded by then, returns that release.

A keyed charge without a ``dp_runs`` row (a ledger older than that table) has no record of what it released,
so a retry under its key is refused. A "once" key (a continual stream's checkpoint + sink) may be charged
only once: a second charge would publish the stream's steps again with new noise. A once key has no run row
and no 'drawn' state.

Older ledgers are migrated when first opened for writing (:func:`dp_spark.ledger.store.migrate`); a 'drawn'
run's identity is stored prefixed (:data:`~dp_spark.ledger.store.DRAWN_IDENTITY`), so that a version without
the 'drawn' state refuses its retry as another identity instead of drawing again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass, field

from fractions import Fraction

from dp_spark.accounting.costs import cost_from_dict
from dp_spark.accounting.composition import check_cost
from dp_spark.accounting.exact import decimal_text, exact
from dp_spark.accounting.filter import amounts, fits, stated
from dp_spark.errors import BudgetExceededError, InputError, ParameterError
from dp_spark.ledger.budget import LedgerBudget
from dp_spark.ledger.rules import (  # noqa: F401 - re-exported
    CHARGED, DRAWN, RELEASED, RULES, RecordedMeanwhile, counted_as)
from dp_spark.ledger.store import DRAWN_IDENTITY, open_store

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}$")

#: Parts of a keyed run's identity bound only once the release has read its public inputs (the digests of
#: its group keys and of top-k's domain); a check made before compares the rest.
READ_PARTS = ("groups", "domain")


def _fields(cost) -> dict[str, float]:
    return {k: v for k, v in cost.to_dict().items() if k != "kind"}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):  # fullmatch: "team\n" is not "team"
        raise ParameterError(
            f"budget name {name!r} must be 1-100 letters, digits or _.:@/- (starting with a letter or digit)."
        )
    return name


@dataclass(frozen=True)
class BudgetState:
    """A budget's total, composed spent, charge count, and the rule used."""

    name: str
    total: object
    spent: object
    charges: int
    #: The exact sum of every counted charge (:func:`_counted_amounts`), compared with no slack.
    exact_spent: dict | None = None

    @property
    def limit(self) -> dict:
        """The total as exact amounts (the decimals written)."""
        return amounts(self.total, self.total.kind)

    def _spent(self) -> dict:
        if self.exact_spent is not None:
            return self.exact_spent
        return {k: exact(v) for k, v in _fields(self.spent).items()}

    @property
    def left(self):
        """Total minus spent, exact, stated as floats whose decimal and binary values are both at most it
        (spending ``left`` always fits), floored at zero."""
        limit, spent = self.limit, self._spent()
        return stated(self.total.kind, {k: limit[k] - spent.get(k, 0) for k in limit}, up=False)

    @property
    def rule(self) -> str:
        return RULES[self.total.kind]

    def fits(self, cost) -> bool:
        """Whether ``cost`` (countable in the budget's kind) fits what is left, exactly, as the privacy
        filter decides (:func:`dp_spark.accounting.filter.fits`)."""
        return fits(self.limit, self._spent(), amounts(cost, self.total.kind))


class Ledger:
    """Named privacy budgets and their charges, in an SQLite file or PostgreSQL."""

    def __init__(self, location, create: bool = False, read_only: bool = False) -> None:
        self.location = str(location)
        self._store = open_store(location, create, read_only)
        self.description = self._store.description

    def close(self) -> None:
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ budgets

    def create_budget(self, name: str, total) -> None:
        """Create budget ``name`` with the total guarantee ``total``; refused if it exists."""
        check_name(name)
        check_cost(total, "budget")
        if all(v == 0 for k, v in _fields(total).items() if k != "delta"):
            raise ParameterError("a budget needs ε > 0 or ρ > 0.")
        with self._store.transaction(outcome=f"The budget {name!r} was not created.") as cur:
            if cur.execute("SELECT name FROM dp_budgets WHERE name = ?", (name,)):
                raise ParameterError(f"budget {name!r} already exists in the ledger {self.description!r}.")
            f = total.to_dict()
            cur.execute(
                "INSERT INTO dp_budgets (name, kind, epsilon, delta, rho, created) VALUES (?, ?, ?, ?, ?, ?)",
                (name, total.kind, f.get("epsilon"), f.get("delta"), f.get("rho"), _now()),
            )

    def names(self) -> list[str]:
        with self._store.transaction() as cur:
            return [r[0] for r in cur.execute("SELECT name FROM dp_budgets ORDER BY name")]

    def state(self, name: str) -> BudgetState:
        with self._store.transaction() as cur:
            return self._state(cur, name)

    def _state(self, cur, name: str) -> BudgetState:
        rows = cur.execute("SELECT kind, epsilon, delta, rho FROM dp_budgets WHERE name = ?", (name,))
        if not rows:
            known = ", ".join(r[0] for r in cur.execute("SELECT name FROM dp_budgets ORDER BY name")) or "none"
            raise ParameterError(
                f"no budget {name!r} in the ledger {self.description!r} (budgets: {known}); "
                "create it with 'dp-spark ledger create'."
            )
        kind, eps, delta, rho = rows[0]
        total = cost_from_dict({"kind": kind, "epsilon": eps, "delta": delta, "rho": rho})
        counted = [_counted_amounts(json.loads(r[0])) for r in
                   cur.execute("SELECT counted FROM dp_charges WHERE budget = ?", (name,))]
        exact_spent = {k: sum((c[k] for c in counted), Fraction(0)) for k in _fields(total)}
        return BudgetState(name, total, stated(kind, exact_spent, up=True), len(counted), exact_spent)

    def history(self, name: str | None = None) -> list[dict]:
        """Every charge (optionally of one budget), oldest first."""
        query = ("SELECT budget, seq, release, cost, counted, rule, run_key, key_seq, parameters, created "
                 "FROM dp_charges")
        params: tuple = ()
        if name is not None:
            query, params = query + " WHERE budget = ?", (name,)
        with self._store.transaction() as cur:
            rows = cur.execute(query + " ORDER BY created, budget, seq", params)
            runs = {(r[0], r[1], int(r[2])): (r[3], json.loads(r[4])) for r in
                    cur.execute("SELECT budget, run_key, key_seq, state, outputs FROM dp_runs")}
        keys = ("budget", "seq", "release", "cost", "counted", "rule", "run_key", "key_seq", "parameters", "time")
        out = []
        for row in rows:
            entry = dict(zip(keys, row))
            for key in ("cost", "counted", "parameters"):
                entry[key] = json.loads(entry[key])
            key_seq = entry.pop("key_seq")
            if entry["run_key"] is not None:
                # the run's state and outputs; None: a stream's once key or a charge without a run row
                entry["state"], entry["outputs"] = runs.get((entry["budget"], entry["run_key"], key_seq),
                                                            (None, None))
            out.append(entry)
        return out

    # ------------------------------------------------------------ charging

    def charge(self, name: str, cost, release: str, *, run_key: str | None = None, key_seq: int = 0,
               once: bool = False, parameters: dict | None = None, identity: dict | None = None,
               outputs: dict | None = None) -> "Charge":
        """Record ``cost`` against budget ``name`` if it fits; return a :class:`Charge`.

        One transaction with the budget locked. With a run key (not ``once``) the charge belongs to
        ``identity`` (release, parameters, input; default: the release name and cost), and an earlier run of
        the key and sequence number is handled as the module docstring says (refused, reused, or returned
        with its record in ``Charge.record`` for the caller to replay). A ``once`` key is refused when
        charged before. Otherwise the composed total plus the charge must fit the budget, or
        BudgetExceededError is raised and nothing is recorded."""
        identity = _identity_doc(identity, release, cost)
        with self._store.transaction(lock_budget=name) as cur:
            state = self._state(cur, name)
            counted = counted_as(cost, state.total.kind, name)
            if run_key is not None:
                earlier = _earlier_charge(cur, name, run_key, key_seq)
                if earlier:
                    if once:
                        _refuse_once(earlier[0], run_key)
                    run = self._run(cur, name, run_key, key_seq)
                    _check_run(run, earlier[0], identity, cost, run_key, key_seq)
                    return Charge(counted, True, run.record if run.state == RELEASED else None, run)
            if not state.fits(cost):
                raise BudgetExceededError(
                    f"{release} would spend {cost.describe()} from the ledger budget {name!r}, which has "
                    f"only {state.left.describe()} left ({state.rule}); lower the release's privacy "
                    "parameters or use another budget. Nothing was charged and no data was read."
                )
            seq = cur.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM dp_charges WHERE budget = ?", (name,))[0][0]
            rule = state.rule if counted == cost else f"{state.rule}; counted as {counted.describe()}"
            now = _now()
            cur.execute(
                "INSERT INTO dp_charges (budget, seq, release, cost, counted, rule, run_key, key_seq, "
                "parameters, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, int(seq), release, json.dumps(cost.to_dict()), json.dumps(_counted_doc(cost, counted)), rule,
                 run_key, key_seq if run_key is not None else None,
                 json.dumps(parameters or {}, default=str, sort_keys=True), now),
            )
            if run_key is not None and not once:
                cur.execute(
                    "INSERT INTO dp_runs (budget, run_key, key_seq, release, identity, described, state, "
                    "outputs, record, created, released) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
                    (name, run_key, key_seq, identity["release"], _fingerprint(identity), _canonical(identity),
                     CHARGED, _canonical(outputs or {}), now),
                )
        return Charge(counted, False, None, None)

    def check_run(self, name: str, run_key: str, key_seq: int, identity: dict | None, cost,
                  release: str) -> "Run | None":
        """What :meth:`charge` would do with this key and sequence number, recording nothing: None (a new
        charge) or the earlier run (reused or replayed); refuses as :meth:`charge` would. An identity
        without the parts bound once the release has read its public inputs (:data:`READ_PARTS`, e.g. the
        CLI's before Spark starts) is compared on the rest."""
        with self._store.transaction() as cur:
            earlier = _earlier_charge(cur, name, run_key, key_seq)
            if not earlier:
                return None
            run = self._run(cur, name, run_key, key_seq)
            if identity is None and run is not None:
                return run  # the caller does not know its identity yet: charge() compares it
            _check_run(run, earlier[0], _identity_doc(identity, release, cost), cost, run_key, key_seq,
                       before_reading=True)
            return run

    def mark_drawn(self, name: str, run_key: str, key_seq: int) -> "Run":
        """Mark the keyed run 'drawn' (from 'charged') in its own transaction with the budget locked,
        committed before the run's first privacy draw: from then on a retry under the key is refused until
        the run records its release. When another run under the key drew first: ParameterError; when it
        recorded its release meanwhile: :class:`RecordedMeanwhile` carrying that run."""
        # a failure (a full disk) rolls the mark back: the run stays 'charged'
        stopped = "The run stopped before drawing any noise, so a retry under the key reuses that charge."
        with self._store.transaction(lock_budget=name, outcome=_charged(name, run_key, key_seq, stopped)) as cur:
            run = self._run(cur, name, run_key, key_seq)
            if run is None:
                raise ParameterError(f"run key {run_key!r} has no charge #{key_seq} in budget {name!r} to draw under.")
            if run.state == RELEASED:
                raise RecordedMeanwhile(run)
            if run.state != CHARGED:
                raise ParameterError(
                    f"run key {run_key!r}{_step(key_seq)} of budget {name!r}: another run under the key drew noise "
                    "and has not recorded its release (it is running, or was interrupted); this run stopped "
                    "before drawing any. A new run key is needed unless that run records its release; the "
                    "earlier charge stays.")
            cur.execute(
                "UPDATE dp_runs SET state = ?, identity = ? WHERE budget = ? AND run_key = ? AND key_seq = ? "
                "AND state = ?",
                (DRAWN, DRAWN_IDENTITY + run.identity, name, run_key, key_seq, CHARGED),
            )
            return self._run(cur, name, run_key, key_seq)

    def record_release(self, name: str, run_key: str, key_seq: int, record: dict,
                       outputs: dict | None = None) -> tuple["Run", bool]:
        """Mark the keyed run 'released' with ``record`` (the Release's JSON report), in one transaction,
        before the release leaves the process. Returns the run as recorded and whether ``record`` is what
        was recorded (False: another process under the key recorded first, and the caller must return that
        release instead)."""
        with self._store.transaction(lock_budget=name, outcome=_charged(name, run_key, key_seq)) as cur:
            run = self._run(cur, name, run_key, key_seq)
            if run is None:
                raise ParameterError(f"run key {run_key!r} has no charge #{key_seq} in budget {name!r} to record.")
            cur.outcome = _charged(name, run_key, key_seq, _UNRECORDED.get(run.state, ""))  # if the record fails
            if run.state in (CHARGED, DRAWN):
                now = _now()
                merged = {**run.outputs, **(outputs or {})}
                cur.execute(
                    "UPDATE dp_runs SET state = ?, identity = ?, record = ?, outputs = ?, released = ? "
                    "WHERE budget = ? AND run_key = ? AND key_seq = ? AND state = ?",
                    (RELEASED, run.identity, json.dumps(record, ensure_ascii=False, sort_keys=True),
                     _canonical(merged), now, name, run_key, key_seq, run.state),
                )
                return self._run(cur, name, run_key, key_seq), True
            return run, False

    def runs(self, name: str | None = None) -> list["Run"]:
        """Every keyed run (optionally of one budget), oldest first."""
        query, params = "SELECT budget, run_key, key_seq FROM dp_runs", ()
        if name is not None:
            query, params = query + " WHERE budget = ?", (name,)
        with self._store.transaction() as cur:
            keys = cur.execute(query + " ORDER BY created, budget, run_key, key_seq", params)
            return [self._run(cur, *k) for k in keys]

    def _run(self, cur, name: str, run_key: str, key_seq: int) -> "Run | None":
        rows = cur.execute(
            "SELECT release, identity, described, state, outputs, record, created, released FROM dp_runs "
            "WHERE budget = ? AND run_key = ? AND key_seq = ?", (name, run_key, key_seq))
        if not rows:
            return None
        release, identity, described, state, outputs, record, created, released = rows[0]
        if identity.startswith(DRAWN_IDENTITY):  # a 'drawn' run's column (module doc)
            identity = identity[len(DRAWN_IDENTITY):]
        return Run(name, run_key, int(key_seq), release, identity, json.loads(described), state,
                   json.loads(outputs), json.loads(record) if record else None, created, released)

    def budget(self, name: str, run_key: str | None = None, *, once: bool = False,
               parameters: dict | None = None, input: str | None = None,
               outputs: dict | None = None) -> LedgerBudget:
        """A budget object for the ``budget=`` argument of every release function.

        ``input``: with a run key, the name of the release's input as you know it (a path, a table, a
        snapshot id), part of the run's identity; without it a release names its DataFrame by the files it
        reads (``DataFrame.inputFiles()``), so a keyed run on a DataFrame read from no files needs
        ``input``. ``outputs``: what the run will write (shown in refusals of later retries)."""
        self.state(check_name(name))  # refuses an unknown budget now
        return LedgerBudget(self, name, run_key=run_key, once=once, parameters=parameters, input=input,
                            outputs=outputs)


@dataclass(frozen=True)
class Run:
    """A keyed charge: what it belongs to and whether its release was recorded."""

    budget: str
    run_key: str
    key_seq: int
    release: str
    identity: str
    described: dict
    state: str
    outputs: dict
    record: dict | None = field(default=None, repr=False)
    created: str = ""
    released: str | None = None

    def describe(self) -> str:
        """The run in one line's worth of words, for refusals."""
        step = _step(self.key_seq)
        when = (f"released {self.released}" if self.state == RELEASED else
                f"charged {self.created}, drew noise, not released" if self.state == DRAWN else
                f"charged {self.created}, not released")
        shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in sorted(self.outputs.items())) or "none named"
        return f"run key {self.run_key!r}{step} of budget {self.budget!r}: {self.release}, {when}; outputs: {shown}"


@dataclass(frozen=True)
class Charge:
    """What :meth:`Ledger.charge` did: the cost as counted, whether an earlier charge of the run key was
    reused, and the recorded Release (its JSON report) when that run was already released (then: replay it)."""

    counted: object
    reused: bool
    record: dict | None = None
    run: Run | None = None


def _counted_doc(cost, counted) -> dict:
    """A charge's ``counted`` column: the cost as counted in the budget's kind (floats) and, under
    ``"exact"``, the exact amounts as decimal text."""
    exact_amounts = amounts(cost, counted.kind)
    return {**counted.to_dict(), "exact": {k: decimal_text(v) for k, v in exact_amounts.items()}}


def _counted_amounts(doc: dict) -> dict:
    """The exact amounts a stored charge counts: its ``"exact"`` decimals, else its floats' exact binary
    values."""
    if "exact" in doc:
        return {k: Fraction(v) for k, v in doc["exact"].items()}
    return {k: exact(v) for k, v in _fields(cost_from_dict(doc)).items()}


def _earlier_charge(cur, name: str, run_key: str, key_seq: int) -> list[tuple]:
    return cur.execute("SELECT cost, release, created FROM dp_charges WHERE budget = ? AND run_key = ? AND key_seq = ?",
                       (name, run_key, key_seq))


def _canonical(doc) -> str:
    return json.dumps(doc, default=str, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _fingerprint(identity: dict) -> str:
    return hashlib.sha256(_canonical(identity).encode("utf-8")).hexdigest()


def _identity_doc(identity: dict | None, release: str, cost) -> dict:
    """The identity of a keyed charge: the given one (release, parameters, input), or for a bare ``spend``
    the label and the cost."""
    doc = dict(identity) if identity else {"release": release}
    doc.setdefault("release", release)
    doc["cost"] = cost.to_dict()
    return json.loads(_canonical(doc))  # as stored: tuples as lists, keys sorted


def _differences(earlier: dict, now: dict) -> str:
    named = ("release", "cost", "parameters", "input") + READ_PARTS
    what = [name for name in named if earlier.get(name) != now.get(name)]
    other = sorted(k for k in set(earlier) | set(now) if k not in named and earlier.get(k) != now.get(k))
    names = {"release": "another release", "cost": "another privacy cost", "parameters": "other parameters",
             "input": "another input", "groups": "other public group keys", "domain": "another public domain"}
    shown = [names[w] + (_parameter_changes(earlier, now) if w == "parameters" else "") for w in what]
    return ", ".join(shown + other) or "another identity"


def _parameter_changes(earlier: dict, now: dict, most: int = 4) -> str:
    """" (max_bound: 100 → 65536, …)": which public parameters differ, so a retry after an upgrade that
    changed a default can pass the recorded value."""
    before, after = earlier.get("parameters"), now.get("parameters")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return ""
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if not keys:
        return ""
    listed = [f"{k}: {before.get(k)!r} → {after.get(k)!r}" for k in keys[:most]]
    return f" ({', '.join(listed)}{', …' if len(keys) > most else ''})"


#: What a keyed run whose release could not be recorded (a full disk) left, by the state it stays in.
_UNRECORDED = {
    CHARGED: ("Its release was not recorded, so it was not returned, printed or written; it drew no noise, so a "
              "retry under the key reuses that charge."),
    DRAWN: ("It drew noise and its release was not recorded, so it was not returned, printed or written; a retry "
            "needs a new run key (the earlier charge stays)."),
}


def _charged(name: str, run_key: str, key_seq: int, then: str = "") -> str:
    """The end of a failure message after a keyed run's charge was committed."""
    return (f"The ledger budget {name!r} was charged for run key {run_key!r}{_step(key_seq)}: that privacy is "
            f"spent.{' ' + then if then else ''}")


def _step(key_seq: int) -> str:
    return f" (step {key_seq + 1})" if key_seq else ""


def _unread(described: dict, identity: dict) -> dict:
    """``described`` without the parts ``identity`` has not bound yet
    (:data:`READ_PARTS`: the release has not read its public inputs)."""
    return {k: v for k, v in described.items() if k in identity or k not in READ_PARTS}


def _check_run(run: Run | None, charge_row, identity: dict, cost, run_key: str, key_seq: int, *,
               before_reading: bool = False) -> None:
    """Refuse a retry the earlier keyed run does not allow (module docstring). ``before_reading``:
    ``identity`` may lack the :data:`READ_PARTS`; the rest is compared."""
    earlier_cost, earlier_release, when = cost_from_dict(json.loads(charge_row[0])), charge_row[1], charge_row[2]
    if run is None:
        raise ParameterError(
            f"run key {run_key!r} was charged {earlier_cost.describe()} for {earlier_release} on {when} by a "
            "dp_spark version that did not record what it released, so a retry cannot be told from a "
            "new run; use a new run key."
        )
    earlier = _unread(run.described, identity) if before_reading else run.described
    if run.identity != _fingerprint(identity) and earlier != identity:
        read = [k for k in READ_PARTS if k in identity and k not in run.described]
        if read and {k: v for k, v in identity.items() if k not in read} == run.described:
            what = " and ".join({"groups": "public group keys", "domain": "public domain"}[k] for k in read)
            raise ParameterError(
                f"{run.describe()}; it was recorded by an earlier dp_spark version, whose run identity did not "
                f"hold the digest of the {what} the release read, so this run cannot be matched to it (the "
                "keys may have changed since): a new run needs a new run key."
            )
        raise ParameterError(
            f"{run.describe()}; this run has {_differences(earlier, identity)}. A run key belongs "
            "to one release with one parameter set and one input: a new run needs a new run key."
        )
    if run.state == DRAWN:
        raise ParameterError(
            f"run key {run_key!r}{_step(key_seq)} drew noise for budget {run.budget!r} ({run.release}, charged "
            f"{run.created}) and was interrupted before it recorded its release: a new run key is needed; the "
            "earlier charge stays."
        )


def _refuse_once(row, run_key: str) -> None:
    earlier_cost, earlier_release = cost_from_dict(json.loads(row[0])), row[1]
    raise BudgetExceededError(
        f"the ledger already holds the charge of {run_key!r} ({earlier_release}, "
        f"{earlier_cost.describe()}): that stream was started before and its released steps would "
        "be published again with new noise. Restore its checkpoint to resume, or use a new "
        "checkpoint and sink for a new stream."
    )


def open_ledger(location, create: bool = False, read_only: bool = False) -> Ledger:
    """Open the ledger at ``location`` (a file path, ``sqlite:///path`` or a ``postgresql://`` URL). A
    missing file is created only with ``create``; a file or database that is not a dp_spark ledger is
    refused unchanged. ``read_only``: nothing is written (``dp-spark ledger show`` / ``history``)."""
    if location is None or str(location).strip() == "":
        raise InputError("give the ledger's path or postgresql:// URL.")
    return Ledger(location, create, read_only)
