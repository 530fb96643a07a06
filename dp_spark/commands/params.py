"""A release's command-line options from its typed ``Params``
(:mod:`dp_spark.plans`): one flag per field, with the field's name, type,
default, help and choices, so a parameter is declared once. The options a
command shares with the others (``INPUT_OPTIONS``, ``RUN_OPTIONS``: the
column names, ``--seed``) and the CLI-only ones stay declared in the
command's module."""

from __future__ import annotations

from dp_spark.commands.base import Option
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
