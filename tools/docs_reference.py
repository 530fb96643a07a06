"""Reference pages of the documentation site, generated at build time.

A MkDocs hook (``hooks:`` in ``mkdocs.yml``): a page holding one of the
markers below gets the marker replaced by Markdown built from the code, so
no reference is a hand-kept copy.

- ``<!-- generated: cli-reference -->``: every ``dp-spark <release>`` option,
  read from :data:`dp_spark.commands.COMMANDS` (whose release options are
  built from each release's ``Params`` by
  :func:`dp_spark.commands.params.release_options`), with its YAML key, type,
  default, choices and help, and for a ``Params`` field its Python default
  and public limit.
- ``<!-- generated: api-reference -->``: one mkdocstrings entry per name of
  ``dp_spark.__all__`` (resolved to the module that defines it, since the
  package exports them lazily), the release functions with their call
  signature as Python sees it (built from ``Params`` at import time).

Run as a script (``python tools/docs_reference.py cli|api``) it prints the
generated Markdown.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

CLI_MARKER = "<!-- generated: cli-reference -->"
API_MARKER = "<!-- generated: api-reference -->"


def _cell(value) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text


def _code(value) -> str:
    if value is None:
        return "—"
    text = repr(value) if isinstance(value, str) else str(value)
    return f"`{_cell(text)}`"


def _type_name(opt) -> str:
    if opt.flag:
        return "switch"
    if opt.negatable:
        return "switch (`--no-` form)"
    return {int: "integer", float: "number", str: "text", bool: "true/false"}.get(
        opt.type, getattr(opt.type, "__name__", "value").replace("_", " "))


def _options_table(options, fields) -> list[str]:
    """One list item per option, on one line: the flag, what it sets, then its YAML key, type, defaults
    (the command line's and, for a ``Params`` field, Python's) and public limit."""
    rows = []
    for opt in options:
        f = fields.get(opt.name)
        facts = [f"YAML `{opt.name}`", _type_name(opt)]
        if opt.choices:
            facts[-1] += ": " + ", ".join(f"`{c}`" for c in opt.choices)
        if not opt.flag:
            facts.append(f"default {_code(opt.default)}" if opt.default is not None else "no default")
        if f is None:
            facts.append("command line only")
        elif not f.metadata.get("api", True):
            facts.append("plan only")
        else:
            facts.append("Python: required" if f.default is dataclasses.MISSING else f"Python default `{f.default!r}`")
        if f is not None and f.metadata.get("limit") is not None:
            facts.append(f"public limit {_code(f.metadata['limit'])}")
        flag = f"`{opt.flag_name}`" + (f" / `--no-{opt.flag_name[2:]}`" if opt.negatable else "")
        rows.append(f"- {flag}: {_cell(opt.help)} *({'; '.join(facts)})*")
    return rows


def cli_reference() -> str:
    """Markdown: the options of every release command, grouped as ``--help`` groups them."""
    from dp_spark.commands import COMMANDS
    from dp_spark.commands.base import INPUT_OPTIONS, READ_OPTIONS, RUN_OPTIONS, options_of
    from dp_spark.plan import params_fields
    from dp_spark.releases import RELEASES

    shared = INPUT_OPTIONS + READ_OPTIONS + RUN_OPTIONS  # a command's own option of a shared name is its own
    out = ["Every release command also takes `--config PATH` (a YAML file of the options below, keyed by the "
           "YAML key; a flag given on the command line wins) and the shared options listed at the end.", ""]
    for name, command in COMMANDS.items():
        spec = RELEASES[name]
        fields = {f.name: f for f in params_fields(spec.params)}
        own = [o for o in options_of(command) if o not in shared]
        out += [f"## `dp-spark {name}`", "", _cell(command.help) + ".", "",
                f"Python: `dp_spark.{spec.python_name}(df, ...)`; its keywords are the fields of "
                f"`{spec.params.__module__}.{spec.params.__qualname__}` (each option below "
                f"gives its Python default beside the command line's).", ""]
        out += _options_table(own, fields)
        python_only = [f for f in params_fields(spec.params, api=True, cli=False)]
        if python_only:
            out += ["", "Python only (no flag): " + ", ".join(
                f"`{f.name}` ({_cell(f.metadata.get('help') or 'see the API reference')})" for f in python_only) + "."]
        out.append("")
    out += ["## Options every release shares", "",
            "The input options (`--input` … `--rows`, and the text-parsing options of a command reading "
            "files) and the output and run options:", ""]
    out += _options_table(INPUT_OPTIONS + READ_OPTIONS + RUN_OPTIONS, {})
    return "\n".join(out) + "\n"


def api_names() -> list[str]:
    """The public names of ``dp_spark`` that the API reference documents (``__version__`` aside)."""
    import dp_spark

    return [name for name in dp_spark.__all__ if name != "__version__"]


def api_reference() -> str:
    """Markdown: a mkdocstrings entry per name of ``dp_spark.__all__``."""
    import dp_spark

    out = [f"`dp_spark.__version__` is the library's version (`{dp_spark.__version__}`).", ""]
    for name in api_names():
        module, attr = dp_spark._LAZY[name]
        value = getattr(dp_spark, name)
        out += [f"## `dp_spark.{name}`", ""]
        if inspect.isfunction(value) and hasattr(value, "__signature__"):
            # a release: its keywords are built from its Params at import time, so the signature
            # is shown as Python reports it, and the entry below shows its docstring only
            sig = inspect.signature(value)
            params = [str(p) for p in sig.parameters.values()]
            params.insert(next(i for i, p in enumerate(sig.parameters.values()) if p.kind is p.KEYWORD_ONLY), "*")
            ret = sig.return_annotation
            ret = "" if ret is sig.empty else f" -> {ret if isinstance(ret, str) else ret.__name__}"
            out += ["```python", f"dp_spark.{name}(", *[f"    {p}," for p in params], f"){ret}", "```", "",
                    f"::: {module}.{attr}", "    options:", "      show_signature: false",
                    "      show_root_heading: false", "      show_root_toc_entry: false", ""]
        else:
            out += [f"::: {module}.{attr}", "    options:", "      show_root_heading: false",
                    "      show_root_toc_entry: false", ""]
    from dp_spark.releases import RELEASES

    out += ["## Release parameters (`Params`)", "",
            "Each release declares its parameters once, as the frozen dataclass `Params` of its plan module; the "
            "Python keywords, the command line flags and the YAML keys are built from it "
            "([command line reference](cli.md)).", ""]
    for spec in RELEASES.values():
        out += [f"### `{spec.params.__module__}.Params`", "", f"::: {spec.params.__module__}.Params",
                "    options:", "      show_root_heading: false", "      show_root_toc_entry: false",
                "      heading_level: 4", ""]
    return "\n".join(out) + "\n"


def on_page_markdown(markdown, page, config, files):  # MkDocs hook
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference())
    return markdown


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "cli"
    print({"cli": cli_reference, "api": api_reference}[which]())
