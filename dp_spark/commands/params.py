"""A release's command-line options from its typed ``Params``
(:mod:`dp_spark.plans`): one flag per field, with the field's name, type,
default, help and choices, so a parameter is declared once. The options a
command shares with the others (``INPUT_OPTIONS``, ``RUN_OPTIONS``: the
column names, ``--seed``) and the CLI-only ones stay declared in the
command's module. :func:`default_command` is the whole subcommand of a
release without hooks of its own."""

from __future__ import annotations

from dp_spark.commands.base import (INPUT_OPTIONS, RUN_OPTIONS, Command, Option, check_group_outputs, groups_writer,
                                    items_writer)
from dp_spark.plan import params_fields


def _cli_type(f):
    meta = f.metadata
    if meta.get("cli_type") is not None:
        return meta["cli_type"]
    for value in (meta.get("cli_default"), f.default):
        if value is not None and not isinstance(value, type):
            return type(value)
    raise TypeError(f"Params field {f.name!r} needs cli_type (its default says nothing)")


def release_options(params_cls, *, declared=(), only=None) -> tuple[Option, ...]:
    """The options of ``params_cls``'s command-line fields, in field order,
    except those named in ``declared`` (options the command declares
    itself, e.g. the shared ``INPUT_OPTIONS``); ``only``: just these fields,
    in this order (a command that places them between its own options)."""
    names = {o.name if isinstance(o, Option) else o for o in declared}
    fields = {f.name: f for f in params_fields(params_cls, cli=True)}
    if only is not None:
        unknown = [name for name in only if name not in fields]
        if unknown:
            raise KeyError(f"{params_cls.__qualname__} has no command-line field {unknown[0]!r}")
    out = []
    for f in (fields.values() if only is None else [fields[name] for name in only]):
        if f.name in names:
            continue
        meta = f.metadata
        out.append(Option(f.name, _cli_type(f), meta["cli_default"], meta["help"], meta.get("choices"),
                          flag=bool(meta.get("flag"))))
    return tuple(out)


_REFUSED = "the run is refused before reading data if the release would exceed it"


def budget_options(params_cls) -> tuple[Option, ...]:
    """``--budget-epsilon``/``--budget-rho``/``--budget-delta``: one per
    privacy parameter of the guarantee (``epsilon``, ``rho``, ``delta``
    fields of ``params_cls``)."""
    names = {f.name for f in params_fields(params_cls)}
    main = "epsilon" if "epsilon" in names else "rho" if "rho" in names else None
    if main is None:
        raise TypeError(f"{params_cls.__qualname__} has neither epsilon nor rho: no budget to check")
    out = [Option(f"budget_{main}", float, None, f"total {'ε' if main == 'epsilon' else 'ρ'} budget; {_REFUSED}")]
    if "delta" in names:
        out.append(Option("budget_delta", float, None, f"total δ budget (with --budget-{main}; default 0)"))
    return tuple(out)


#: The artifacts a default command writes: artifact -> (its option, help, writer).
_ARTIFACTS = {
    "items": (Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
              items_writer("items", "items")),
    "groups": (Option("groups_output", str, None, "with --group-by: write every group's released values here: "
                      "Parquet, CSV (a path ending in .csv) or table:db.name (atomically)"), groups_writer()),
}


def default_command(spec) -> Command:
    """The ``dp-spark`` subcommand of a release without hooks of its own,
    from its :class:`~dp_spark.releases.ReleaseSpec` and ``Params``: the
    input options, its ``Params``' command-line fields, one output option
    per artifact (``--items-output``; ``--groups-output`` when it takes
    ``group_by``), the budget options of its guarantee, then the run options."""
    if not spec.help:
        raise TypeError(f"{spec.name}: its ReleaseSpec needs help=... (the line dp-spark --help shows)")
    params = spec.params
    grouped = any(f.name == "group_by" for f in params_fields(params, cli=True))
    artifacts = tuple(spec.artifacts) + (("groups",) if grouped else ())
    unknown = [a for a in artifacts if a not in _ARTIFACTS]
    if unknown:
        raise TypeError(f"{spec.name}: no default writer for its {unknown[0]!r}; give it a command module "
                        f"(dp_spark/commands/{spec.python_name}.py) with its writer")
    options = (INPUT_OPTIONS + release_options(params, declared=INPUT_OPTIONS + RUN_OPTIONS)
               + tuple(_ARTIFACTS[a][0] for a in artifacts) + budget_options(params) + RUN_OPTIONS)

    def plan_options(opts):
        return check_group_outputs(opts, "per-group values", "items_output" if "items" in artifacts else None)

    hooks = {"plan_options": plan_options} if grouped else {}
    return Command(spec.name, spec.help, options, {a: _ARTIFACTS[a][1] for a in artifacts}, **hooks)
