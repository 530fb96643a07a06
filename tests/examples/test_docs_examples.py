"""Every code block a user would run, in README.md and in the documentation
site's pages (docs/), is run here or says why it is not.

A fenced block is ```bash, ```python or ```text (a layout, a diagram: not code).
A bash or python block is run unless the line right above it is an HTML
comment ``<!-- not runnable: REASON -->``. Each docs page runs in a fresh
folder holding the sample files (``dp-spark sample-data``), as its pages say,
its blocks in document order: the bash lines as the README recipes are run
(``dp-spark`` and ``cd`` in process on the shared session, ``spark-submit`` of a
``jobs/`` script through its command), the python blocks with ``exec`` in a
fresh namespace. The README's bash blocks are run by test_readme_recipes.py
(its SKIPPED lines carry their reasons there); its python blocks run here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dp_spark.releases import RELEASES
from tests.examples.test_readme_recipes import SKIPPED, _shell_directory, recipe_lines, run_recipe_line

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(p.relative_to(REPO).as_posix() for p in DOCS.rglob("*.md"))
LANGUAGES = ("bash", "python", "text")
_FENCE = re.compile(r"^```([A-Za-z0-9_-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*not runnable:\s*(.*?)\s*-->", re.S)


def blocks(markdown: str) -> list[tuple[str, str, str | None]]:
    """(language, code, the not-runnable reason or None) of every fenced block, in order."""
    out = []
    for match in _FENCE.finditer(markdown):
        before = markdown[:match.start()].rstrip().splitlines()
        reason = None
        if before:
            marker = _MARKER.fullmatch(before[-1].strip())
            reason = marker.group(1) if marker else None
        out.append((match.group(1), match.group(2), reason))
    return out


@pytest.mark.parametrize("text, expected", [
    ("x\n\n```bash\ndp-spark top-k\n```\n", [("bash", "dp-spark top-k\n", None)]),
    ("<!-- not runnable: needs Docker -->\n```bash\ndocker compose up\n```\n",
     [("bash", "docker compose up\n", "needs Docker")]),
    ("<!-- not runnable: needs Docker -->\n\ntext between\n\n```python\nx = 1\n```\n", [("python", "x = 1\n", None)]),
    ("```\nplain\n```\n", [("", "plain\n", None)]),
])
def test_blocks_and_their_markers_are_read(text, expected):
    assert blocks(text) == expected


@pytest.mark.parametrize("page", ["README.md", *PAGES])
def test_every_block_is_bash_python_or_text_and_every_marker_has_a_reason(page):
    for language, code, reason in blocks((REPO / page).read_text()):
        assert language in LANGUAGES, f"{page}: a ```{language} block; write bash, python or text"
        assert reason is None or (reason and language != "text"), f"{page}: a marker without a reason: {code[:80]}"


def test_the_docs_pages_hold_runnable_examples():
    """The pages are not all marked away: most of their code runs."""
    run = [(page, lang) for page in PAGES for lang, _, reason in blocks((REPO / page).read_text())
           if lang in ("bash", "python") and reason is None]
    assert len(run) >= 15 and {lang for _, lang in run} == {"bash", "python"}
    for release in RELEASES:  # every release has its page, with a command and a Python example that run
        page = f"docs/releases/{release}.md"
        assert page in PAGES, f"{release} has no page {page}"
        assert {lang for p, lang in run if p == page} == {"bash", "python"}, f"{page}: no runnable example"


def _write_samples(folder: Path) -> None:
    from dp_spark.sample_data import write_samples

    write_samples(str(folder / "samples"))
    for shipped in ("jobs", "conf"):  # ../jobs and ../conf from the samples folder, as in a checkout
        (folder / shipped).symlink_to(REPO / shipped)


def _run_bash(code: str, capsys, cd, where: str) -> None:
    for line in recipe_lines(f"```bash\n{code}```\n"):
        try:
            run_recipe_line(line, capsys, cd)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None


def _run_python(code: str, where: str) -> None:
    namespace = {"__name__": "__docs_example__"}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the page's own example, as a user runs it


def _runnable(page: str) -> list[tuple[int, str, str]]:
    return [(i, lang, code) for i, (lang, code, reason) in enumerate(blocks((REPO / page).read_text()))
            if lang in ("bash", "python") and reason is None]


@pytest.mark.parametrize("page", [page for page in PAGES if _runnable(page)])
def test_every_runnable_block_of_a_docs_page_runs(page, spark, tmp_path, capsys):
    runnable = _runnable(page)
    _write_samples(tmp_path)
    with _shell_directory(spark) as cd:
        cd(str(tmp_path / "samples"))
        for i, language, code in runnable:
            where = f"{page}, block {i + 1}"
            if language == "bash":
                _run_bash(code, capsys, cd, where)
            else:
                _run_python(code, where)


def test_every_python_block_of_the_readme_runs(spark, tmp_path):
    readme = (REPO / "README.md").read_text()
    runnable = [code for lang, code, reason in blocks(readme) if lang == "python" and reason is None]
    assert runnable, "the README has no Python example"
    _write_samples(tmp_path)
    with _shell_directory(spark) as cd:
        cd(str(tmp_path / "samples"))
        for i, code in enumerate(runnable):
            _run_python(code, f"README.md, python block {i + 1}")


def test_the_readme_bash_blocks_are_the_recipes_test_runs():
    """No README bash block is marked away: each of its lines is run by
    test_readme_recipes.py or listed in its SKIPPED with the reason."""
    readme = (REPO / "README.md").read_text()
    assert all(reason is None for lang, _, reason in blocks(readme) if lang == "bash")
    lines = recipe_lines(readme)
    assert set(SKIPPED) <= set(lines)
