"""A Griffe extension for the documentation site: docstrings in dp_spark use
Sphinx roles (``:class:`~dp_spark.Release```, ``:func:`plan```); mkdocstrings
renders Markdown, so each role becomes a code span of the name a reader would
see (``~`` keeps the last component, as Sphinx does)."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _span(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class SphinxRoles(griffe.Extension):
    def on_object(self, *, obj, **kwargs) -> None:  # every module, class, function and attribute
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_span, obj.docstring.value)
