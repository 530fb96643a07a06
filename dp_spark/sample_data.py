"""``dp-spark sample-data DIR``: write the small sample inputs the README's
recipes read (issue 42 §1), so a newcomer can run every recipe in order."""

from __future__ import annotations

NAME = "sample-data"
HELP = "write the sample inputs the README's recipes read into a folder"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    p.add_argument("directory", metavar="DIR", help="folder to write the sample files into (created if missing)")


def run(args) -> int:
    raise NotImplementedError("sample-data: being written (issue 42 §1)")
