"""One declaration per release (issue 37 §2): the public release function's
signature is its Params' API fields (dp_spark.plan.release_api), so a
parameter is declared once; a call binds to that signature as a written one
would, builds the plan and runs it. No Spark."""

from __future__ import annotations

import inspect

import pytest

from dp_spark.plan import keyword_signature, params_fields, release_api
from dp_spark.plans import distinct_count, set_union


def _made(plans):
    calls = []

    @release_api(plans.plan)
    def released(df, plan, budget, ledger):
        """its doc"""
        calls.append((plan, df, budget, ledger))
        return "released"

    return released, calls


@pytest.mark.parametrize("plans", [distinct_count, set_union], ids=lambda m: m.RELEASE)
def test_the_signature_is_the_api_fields_with_df_budget_and_ledger(plans):
    release, _ = _made(plans)
    sig = inspect.signature(release)
    names = list(sig.parameters)
    assert names[0] == "df" and names[-2:] == ["budget", "ledger"]
    api = {f.name for f in params_fields(plans.Params, api=True)}
    assert set(names[1:-2]) == api
    assert all(sig.parameters[n].kind is inspect.Parameter.KEYWORD_ONLY for n in names[1:])
    assert {n: sig.parameters[n].default for n in names[1:-2]} == \
        {n: p.default for n, p in keyword_signature(plans.Params, api=True).parameters.items()}
    shared = {"group_by", "groups", "max_groups"}  # GroupParams': after the release's own, required ones first
    assert [n for n in names[1:-2] if n in shared] == names[-2 - len(shared & api):-2]
    required = [n for n in names[1:-2] if sig.parameters[n].default is inspect.Parameter.empty]
    assert names[1:1 + len(required)] == required
    assert release.__name__ == "released" and release.__doc__ == "its doc"


def test_a_call_builds_the_plan_from_the_keywords_and_runs_it():
    release, calls = _made(distinct_count)
    assert release("df", epsilon=0.5, max_bound=4, budget="b") == "released"
    plan, df, budget, ledger = calls[0]
    assert (df, budget, ledger) == ("df", "b", None)
    assert plan.release == "distinct-count" and plan.given.epsilon == 0.5 and plan.given.max_bound == 4


def test_unknown_missing_or_positional_keywords_are_type_errors_before_the_plan():
    release, calls = _made(distinct_count)
    with pytest.raises(TypeError, match="epsiloon"):
        release("df", epsilon=1.0, epsiloon=1.0)
    with pytest.raises(TypeError, match="epsilon"):
        release("df")  # ε is required
    with pytest.raises(TypeError):
        release("df", 1.0)  # keywords only
    assert calls == []
