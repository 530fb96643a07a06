"""YAML job configs: the same options as the command line, as a mapping.

A config file holds the options of one release, named either way (``max_bound`` or ``max-bound``). Options
given on the command line override the file; the release's defaults fill the rest.

Configs are read strictly, so a file never changes a privacy parameter silently: a key given twice (also as
``max_bound`` and ``max-bound``) is refused; numbers are YAML 1.2 numbers only (``1:30`` is not 90, ``017``
is 17, ``1_000`` and base-60 forms are refused), booleans are ``true`` / ``false``; anchors, aliases and
merge keys are refused; a file larger than :data:`MAX_CONFIG_BYTES` is not parsed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from dp_spark.errors import InputError, ParameterError

#: Largest config file read (a config is a few dozen lines).
MAX_CONFIG_BYTES = 64 * 1024

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_MERGE = "tag:yaml.org,2002:merge"
_NOT_A_NUMBER = "tag:dp_spark,2025:yaml-1.1-number"


class _ConfigError(yaml.YAMLError):
    """A strictness refusal, with the line it is on."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's numbers and booleans, no
    anchors, aliases or merge keys, and no duplicate keys."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT, _BOOL, _MERGE)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _ConfigError(f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not allowed; "
                               "write every value out")
        if getattr(event, "anchor", None) is not None:
            raise _ConfigError(f"line {event.start_mark.line + 1}: anchors (&{event.anchor}) are not allowed; "
                               "write every value out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            name = str(key).replace("-", "_")
            line = key_node.start_mark.line + 1
            if name in seen:
                raise _ConfigError(f"line {line}: the key {str(key)!r} is given twice (also on line "
                                   f"{seen[name]}; '-' and '_' are the same); keep one")
            seen[name] = line
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
StrictLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
StrictLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))
# YAML 1.1 numbers ("1:30" = 90, "1_000"): refused, never read as text that int()/float() turn into a number
StrictLoader.add_implicit_resolver(
    _NOT_A_NUMBER, re.compile(r"^(?=[^_:]*[_:])[-+]?\.?[0-9][0-9_:.]*(?:[eE][-+]?[0-9_]+)?$"),
    list("-+.0123456789"))


def _construct_int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)  # "017" is 17 (YAML 1.2), not octal


def _construct_float(loader, node):
    text = loader.construct_scalar(node).lower()
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text.endswith(".nan"):
        return math.nan
    return float(text)


def _refuse_yaml11_number(loader, node):
    raise _ConfigError(f"line {node.start_mark.line + 1}: {loader.construct_scalar(node)!r} is not a YAML 1.2 "
                       "number (YAML 1.1 reads '1:30' as 90 and allows '_'); write plain digits, e.g. 90 or "
                       "1000, or quote it if it is text")


StrictLoader.add_constructor(_INT, _construct_int)
StrictLoader.add_constructor(_FLOAT, _construct_float)
StrictLoader.add_constructor(_NOT_A_NUMBER, _refuse_yaml11_number)


def parse_config(text: str, name: str = "config") -> Any:
    """The YAML document ``text`` read strictly (:class:`StrictLoader`)."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader
    except _ConfigError as exc:
        raise InputError(f"config file {name!r}: {exc}.") from None
    except yaml.YAMLError as exc:
        raise InputError(f"config file {name!r} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise InputError(f"config file {name!r} is nested too deeply; a config is a flat option: value "
                         "mapping.") from None


def load_config(path: str | None, allowed: set[str]) -> dict[str, Any]:
    """The options in ``path`` (empty without one). Unknown keys are refused, naming the allowed ones, so a
    typo never falls back to a default silently."""
    if not path:
        return {}
    file = Path(path)
    if file.is_dir():
        raise InputError(f"config file {path!r} is a folder; give the path of the YAML file itself.")
    if not file.is_file():
        raise InputError(f"config file {path!r} does not exist.")
    try:
        with open(file, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise InputError(f"config file {path!r} cannot be read ({exc.strerror or type(exc).__name__}).") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise InputError(f"config file {path!r} is larger than {MAX_CONFIG_BYTES // 1024} KiB; a config holds "
                         "a few options, so it is not read.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"config file {path!r} is not UTF-8 text.") from None
    data = parse_config(text, str(path)) or {}
    if not isinstance(data, dict):
        raise InputError(f"config file {path!r} must hold a mapping of option: value.")
    options = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ParameterError(
            f"unknown option {unknown[0]!r} in {path}; allowed: {', '.join(sorted(allowed))}."
        )
    return options
