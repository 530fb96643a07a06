"""A ledger budget usable wherever a release takes ``budget=`` (like a PrivacyFilter).

It has the methods the releases call (``spend(cost, label)``, ``can_spend``) and the filter's ``budget``,
``spent`` and ``remaining``, read from the ledger, so every process using the ledger shares the budget. The
functions below are a keyed release's steps: bind its identity before it spends (:func:`bind_release`),
return a recorded release instead of drawing (:func:`replayed`), mark the run 'drawn' before its first
privacy draw (:func:`draw_mark`), and record what it released before returning it (:func:`record_release`).
The rules are in :mod:`dp_spark.ledger.ledger`.
"""

from __future__ import annotations

import functools
import hashlib
import os

from dp_spark.errors import ParameterError
from dp_spark.keys import GroupKeys, json_digest
from dp_spark.ledger.rules import CHARGED, DRAWN, RELEASED, RecordedMeanwhile, counted_as
from dp_spark.report import Release


class LedgerBudget:
    """Spend from a named budget of a persisted ledger.

    ``run_key``: this object's charges are the run's charges, numbered in order, each belonging to one
    release with one parameter set and one input (the retry rules: :mod:`dp_spark.ledger.ledger`). ``once``:
    the key may be charged only once (a continual stream, keyed by its checkpoint and sink). ``input``: the
    input's name, part of a keyed run's identity; ``outputs``: what the run writes (recorded, and named in
    refusals)."""

    def __init__(self, ledger, name: str, run_key: str | None = None, *, once: bool = False,
                 parameters: dict | None = None, input: str | dict | None = None,
                 outputs: dict | None = None) -> None:
        if run_key is not None and (not isinstance(run_key, str) or not run_key.strip()):
            raise ParameterError(f"run_key must be a non-empty string; got {run_key!r}.")
        if input is not None and not isinstance(input, (str, dict)):
            raise ParameterError(f"input must be a name (a str); got {type(input).__name__}.")
        self.ledger, self.name, self.run_key, self.once = ledger, name, run_key, once
        self.parameters = dict(parameters or {})
        self.input = input
        self.outputs = {k: str(v) for k, v in (outputs or {}).items() if v is not None}
        self.identity: dict | None = None  # bound by each release (bind_release) before it spends
        self._fixed_identity: dict | None = None  # fix_identity's
        self._next_seq = 0
        self._last_seq: int | None = None
        self.reused = False
        self.record: dict | None = None  # the recorded Release of the last charge, if it was released
        self.run = None
        self.drawn = False  # whether this object marked its last charge 'drawn' (mark_drawn)

    # ---------------------------------------------------------------- state

    @property
    def budget(self):
        """The budget's total guarantee."""
        return self.ledger.state(self.name).total

    @property
    def spent(self):
        """Everything charged to the budget so far (by every run), composed."""
        return self.ledger.state(self.name).spent

    @property
    def remaining(self):
        return self.ledger.state(self.name).left

    @property
    def keyed(self) -> bool:
        """A run key that is not a stream's once key (its charges carry an identity)."""
        return self.run_key is not None and not self.once

    @property
    def run_state(self) -> str | None:
        """The state this object left the run of its last charge in ('charged', 'drawn', 'released'); None
        when unkeyed or not charged yet. For the CLI's failure message."""
        if not self.keyed or self._last_seq is None:
            return None
        return self.run.state if self.run is not None else CHARGED

    def fix_identity(self, identity: dict) -> None:
        """Set the run's identity (release, parameters, input) for every release spending from this budget:
        the CLI's, known from its options before Spark starts (so ``Plan.check`` refuses a mismatch early)."""
        self.identity = self._fixed_identity = dict(identity)

    # ---------------------------------------------------------------- spending

    def can_spend(self, cost) -> bool:
        """Whether ``spend(cost)`` would be accepted now (changes nothing). Under a run key it agrees with
        ``spend``: another identity is refused here too (ParameterError), and a reused or replayed charge
        counts as accepted."""
        state = self.ledger.state(self.name)
        counted_as(cost, state.total.kind, self.name)  # refuses a cost the budget cannot count
        if self.once and self._has_key_charge():
            return True  # a stream's resume spends nothing
        if self.keyed:
            run = self.ledger.check_run(self.name, self.run_key, self._next_seq, self.identity, cost,
                                        self._label())
            if run is not None:
                return True  # reused or replayed ('drawn' was refused by check_run)
        return state.fits(cost)  # exactly as charge() and the PrivacyFilter decide

    def _has_key_charge(self) -> bool:
        return any(c["run_key"] == self.run_key for c in self.ledger.history(self.name))

    def _label(self, label: str = "") -> str:
        return (self.identity or {}).get("release") or label or "release"

    def spend(self, cost, label: str = ""):
        """Charge ``cost`` under ``label`` if the budget holds it; return it as counted.

        Raises BudgetExceededError (nothing recorded) when it would not fit. When this identity's earlier
        run under the key was released, nothing is charged and ``self.record`` holds its Release (replayed:
        :func:`replayed`)."""
        if not isinstance(label, str):
            raise ParameterError(f"label must be a str, got {type(label).__name__}")
        charge = self.ledger.charge(
            self.name, cost, label or "release", run_key=self.run_key, key_seq=self._next_seq,
            once=self.once, parameters=self.parameters, identity=self.identity, outputs=self.outputs,
        )
        self._last_seq = self._next_seq
        self._next_seq += 1
        self.reused = self.reused or charge.reused
        self.record, self.run = charge.record, charge.run
        self.drawn = False
        return charge.counted

    def mark_drawn(self, seq: int | None = None) -> None:
        """Record, in its own committed transaction, that the run of charge ``seq`` (default: the last) is
        about to make its first privacy draw (:meth:`dp_spark.ledger.ledger.Ledger.mark_drawn`). On a
        refusal ``self.run`` holds the run as the ledger has it (for the CLI's failure line);
        RecordedMeanwhile: return that release."""
        seq = self._last_seq if seq is None else seq
        if not self.keyed or seq is None:
            raise ParameterError("only a keyed ledger budget that was charged marks a run 'drawn'.")
        try:
            self.run = self.ledger.mark_drawn(self.name, self.run_key, seq)
        except RecordedMeanwhile as meanwhile:
            self.run = meanwhile.run  # 'released': what this run returns
            raise
        except ParameterError:
            self.run = next((r for r in self.ledger.runs(self.name)
                             if r.run_key == self.run_key and r.key_seq == seq), self.run)
            raise
        self.drawn = self.run.state == DRAWN

    def __repr__(self) -> str:
        return f"LedgerBudget({self.ledger.description!r}, {self.name!r}, run_key={self.run_key!r})"


def budget_or_ledger(budget, ledger):
    """The spending object of a release called with ``budget=`` (a PrivacyFilter or a LedgerBudget) or
    ``ledger=`` (a LedgerBudget); not both."""
    if ledger is None:
        return budget
    if budget is not None:
        raise ParameterError("give budget= or ledger=, not both (a ledger budget is itself the budget).")
    if not isinstance(ledger, LedgerBudget):
        raise ParameterError(
            "ledger= takes a ledger budget: dp_spark.ledger.open_ledger(PATH).budget(NAME, run_key=...); "
            f"got {type(ledger).__name__}."
        )
    return ledger


# -------------------------------------------------------------- a keyed release's steps


def input_name(df) -> str | None:
    """A DataFrame's name for a keyed run's identity: the files it reads (``inputFiles()``: public metadata,
    no data read), or None when it reads none or the client cannot say."""
    try:
        files = sorted(str(f) for f in df.inputFiles())
    except Exception:  # noqa: BLE001 - e.g. a source or client without inputFiles
        return None
    return "files:" + ",".join(files) if files else None


def keys_digest(keys) -> str:
    """sha256 of public group keys (their JSON, in order): a keyed run's identity holds what the keys are,
    not only where they came from (:func:`dp_spark.keys.json_digest`; a
    :class:`~dp_spark.keys.GroupKeys` streams its chunks)."""
    return keys.digest() if isinstance(keys, GroupKeys) else json_digest([list(keys)])


def file_digest(path: str) -> str:
    """sha256 of a local public file's bytes, or of a directory's files (relative paths and bytes, sorted);
    a URI, ``table:`` name or glob is not read ("unread: ..."). For the CLI's identity of a keyed run
    (``--groups``) before Spark starts; the release adds the digest of the keys it read
    (:func:`read_identity`)."""
    text = str(path)
    if "://" in text or text.startswith("table:") or not os.path.exists(text):
        return f"unread: {text}"
    digest = hashlib.sha256()
    if os.path.isdir(text):
        for root, dirs, files in os.walk(text):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, text).encode("utf-8") + b"\0")
                with open(full, "rb") as fh:
                    digest.update(hashlib.sha256(fh.read()).digest())
    else:
        with open(text, "rb") as fh:
            digest.update(fh.read())
    return "sha256:" + digest.hexdigest()


def groups_identity(plan) -> dict | None:
    """The group part of a keyed run's identity (None for an ungrouped plan): the group column, the cap
    ``max_groups`` and the public keys' digest ("chosen privately" when ``groups=None``). Called once the
    template resolved the keys."""
    p = getattr(plan, "params", None)
    group_by = getattr(p, "group_by", None)
    if group_by is None:
        return None
    keys = p.groups
    return {"group_by": group_by, "max_groups": p.max_groups,
            "keys": keys_digest(keys) if isinstance(keys, (tuple, GroupKeys)) else "chosen privately"}


def read_identity(plan) -> dict:
    """The parts of a keyed run's identity known once the release has read its public inputs
    (:data:`dp_spark.ledger.ledger.READ_PARTS`): ``groups`` (:func:`groups_identity`) and ``domain`` (the
    digest of top-k's normalised public domain), so keys or a domain changed under the same name make
    another run."""
    out = {}
    if (groups := groups_identity(plan)) is not None:
        out["groups"] = groups
    domain = getattr(getattr(plan, "params", None), "domain", None)
    if isinstance(domain, (list, tuple)):
        out["domain"] = keys_digest(domain)
    return out


def bind_release(budget, plan, df=None) -> None:
    """Give a keyed ledger budget the identity of the release about to spend from it: release name,
    parameters as given, input (the budget's ``input``, else the files ``df`` reads) and
    :func:`read_identity`. Each release binds its own; an identity the CLI fixed is kept, with those digests
    added. Other budgets: nothing. Reads no data."""
    if not isinstance(budget, LedgerBudget) or not budget.keyed:
        return
    if budget._fixed_identity is not None:
        budget.identity = {**budget._fixed_identity, **read_identity(plan)}
        return
    name = budget.input
    if name is None and df is not None:
        name = input_name(df)
    if name is None:
        raise ParameterError(
            f"run key {budget.run_key!r}: this DataFrame reads no files, so a retry could not be told from a "
            "run on other data; name the input: ledger.budget(NAME, run_key=..., input='what the data is')."
        )
    budget.identity = {"release": plan.release, "parameters": plan.to_dict()["parameters"], "input": name,
                       **read_identity(plan)}  # the keys' and domain's contents, not only their names


def recorded_release(budget, plan, df=None):
    """Bind the release's identity (:func:`bind_release`) and, when the run key already released this
    identity at this step, return the recorded Release (nothing is read, checked or charged). None
    otherwise: ``plan.spend`` decides again in its own transaction."""
    bind_release(budget, plan, df)
    if not isinstance(budget, LedgerBudget) or not budget.keyed:
        return None
    run = budget.ledger.check_run(budget.name, budget.run_key, budget._next_seq, budget.identity, plan.guarantee,
                                  plan.release)
    if run is None or run.state != RELEASED:
        return None
    budget._last_seq = budget._next_seq
    budget._next_seq += 1
    budget.reused, budget.record, budget.run = True, run.record, run
    return replay_of(run)


def replayed(budget):
    """The recorded Release of an earlier run under the budget's key with the same identity (no data read,
    no noise drawn), or None."""
    if not isinstance(budget, LedgerBudget) or budget.record is None:
        return None
    return replay_of(budget.run)


def draw_mark(budget):
    """The callback the release template runs before the first use of the run's noise generator
    (:func:`dp_spark.noise.rng.first_use_generator`): ``mark_drawn`` of this release's charge (its number
    bound now) for a charged keyed ledger budget; None for every other budget."""
    if not isinstance(budget, LedgerBudget) or not budget.keyed or budget._last_seq is None:
        return None
    return functools.partial(budget.mark_drawn, budget._last_seq)


def record_release(budget, release):
    """Record ``release`` as the keyed run's release (one transaction) before it is returned; returns what
    the caller must return: ``release``, or the release another process recorded first under the key
    (``release`` is then dropped, never shown)."""
    if not isinstance(budget, LedgerBudget) or not budget.keyed or budget._last_seq is None:
        return release
    run, recorded = budget.ledger.record_release(budget.name, budget.run_key, budget._last_seq,
                                                 release.to_dict(), budget.outputs)
    budget.run = run  # 'released': a retry replays it
    if recorded:
        return release
    return replay_of(run)


def replay_of(run):
    """The Release recorded by ``run`` (a released keyed run), as a replay."""
    return Release.from_record(run.record, replay=replay_note(run))


def replay_note(run) -> dict:
    """The ``replay`` entry of a Release returned from ``run``'s record."""
    return {"run_key": run.run_key, "budget": run.budget, "step": run.key_seq, "released": run.released,
            "outputs": dict(run.outputs)}
