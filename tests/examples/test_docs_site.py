"""The documentation site: its generated references cover the code (every
name of ``dp_spark.__all__``, every option of every ``dp-spark`` release
command, read from the release's ``Params``), and ``mkdocs build --strict``
passes and fails on a broken link (when the docs extra is installed; .ci/run
installs it and builds the site after the tests)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import docs_reference  # noqa: E402  (tools/ is no package: the hook mkdocs.yml loads by path)


def test_the_reference_pages_hold_the_markers_the_hook_replaces():
    assert docs_reference.CLI_MARKER in (REPO / "docs" / "reference" / "cli.md").read_text()
    assert docs_reference.API_MARKER in (REPO / "docs" / "reference" / "api.md").read_text()
    config = (REPO / "mkdocs.yml").read_text()
    assert "tools/docs_reference.py" in config and "reference/cli.md" in config and "reference/api.md" in config


def test_every_public_name_is_in_the_api_reference():
    import dp_spark

    page = docs_reference.api_reference()
    for name in dp_spark.__all__:
        if name == "__version__":
            assert "dp_spark.__version__" in page
            continue
        module, attr = dp_spark._LAZY[name]
        assert f"## `dp_spark.{name}`" in page and f"::: {module}.{attr}\n" in page, name


def test_a_release_entry_shows_the_signature_built_from_its_params():
    import dp_spark
    from dp_spark.plan import params_fields
    from dp_spark.releases import RELEASES

    page = docs_reference.api_reference()
    for spec in RELEASES.values():
        entry = page[page.index(f"## `dp_spark.{spec.python_name}`"):]
        entry = entry[:entry.index("\n## ")] if "\n## " in entry else entry
        for f in params_fields(spec.params, api=True):
            assert f"\n    {f.name}" in entry, (spec.name, f.name)
        assert "    budget=None," in entry and "    ledger=None," in entry
        assert getattr(dp_spark, spec.python_name)


def test_every_option_of_every_release_command_is_in_the_cli_reference():
    from dp_spark.commands import COMMANDS
    from dp_spark.commands.base import options_of
    from dp_spark.plan import params_fields
    from dp_spark.releases import RELEASES

    page = docs_reference.cli_reference()
    for name, command in COMMANDS.items():
        section = page[page.index(f"## `dp-spark {name}`"):]
        section = section[:section.index("\n## ")]
        shared = page[page.index("## Options every release shares"):]
        for opt in options_of(command):
            row = next((line for line in (section + shared).splitlines() if line.startswith(f"- `{opt.flag_name}`")),
                       None)
            assert row is not None, (name, opt.flag_name)
            assert f"YAML `{opt.name}`" in row and docs_reference._cell(opt.help) in row, (name, opt.flag_name)
        for f in params_fields(RELEASES[name].params, cli=True):  # one declaration: the Params field's help
            row = next(line for line in (section + shared).splitlines()
                       if line.startswith(f"- `--{f.name.replace('_', '-')}`"))
            assert docs_reference._cell(f.metadata["help"]) in row, (name, f.name)


def test_the_cli_reference_follows_a_changed_params_field():
    """Generated, not copied: a field's help changed in Params before the
    commands are built (in a fresh process) shows on the page."""
    script = (
        "import dataclasses, sys\n"
        "from dp_spark.plans import distinct_count\n"
        "field = {f.name: f for f in dataclasses.fields(distinct_count.Params)}['beta']\n"
        "field.metadata = {**field.metadata, 'help': 'a help text written only by this test'}\n"
        f"sys.path.insert(0, {str(REPO / 'tools')!r})\n"
        "import docs_reference\n"
        "print(docs_reference.cli_reference())\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("- `--beta`"))
    assert "a help text written only by this test" in row


def _mkdocs() -> list[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("the docs extra is not installed (pip install -e '.[docs]'); .ci/run builds the site")
    return [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _copy_site_sources(to: Path) -> None:
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(REPO / name, to / name)
    for name in ("docs", "tools", "dp_spark"):
        shutil.copytree(REPO / name, to / name, ignore=shutil.ignore_patterns("__pycache__"))


def test_the_site_builds_strictly_and_a_broken_link_fails_it(tmp_path):
    command = _mkdocs()
    src = tmp_path / "src"
    src.mkdir()
    _copy_site_sources(src)
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_MKDOCS_2_WARNING": "1"}
    ok = subprocess.run([*command, "-d", str(tmp_path / "site")], cwd=src, env=env, capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, ok.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").is_file()
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--max-bound" in cli and "generated: cli-reference" not in cli
    page = src / "docs" / "security.md"
    page.write_text(page.read_text() + "\nSee [a page that does not exist](no-such-page.md).\n")
    broken = subprocess.run([*command, "-d", str(tmp_path / "site2")], cwd=src, env=env, capture_output=True,
                            text=True, timeout=600)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr, broken.stderr[-4000:]
