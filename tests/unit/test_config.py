"""Config files are read strictly: nothing in a YAML file changes a privacy
parameter silently (issue 22)."""

from __future__ import annotations

import pytest

from dp_spark.commands import COMMANDS
from dp_spark.commands.base import options_of
from dp_spark.config import load_config
from dp_spark.errors import InputError

ALLOWED = {o.name for o in options_of(COMMANDS["distinct-count"])}

ALIAS_BOMB = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n" + "".join(
    f"{chr(c + 1)}: &{chr(c + 1)} [*{chr(c)},*{chr(c)},*{chr(c)},*{chr(c)},*{chr(c)},*{chr(c)},*{chr(c)},"
    f"*{chr(c)},*{chr(c)}]\n" for c in range(ord("a"), ord("i")))


def _load(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return load_config(str(path), ALLOWED)


@pytest.mark.parametrize("text, fragment", [
    ("epsilon: 0.1\nepsilon: 10\n", "line 2: the key 'epsilon' is given twice (also on line 1"),
    ("max_bound: 5\nmax-bound: 50\n", "the key 'max-bound' is given twice"),
    ("epsilon: 1:30\n", "'1:30' is not a YAML 1.2 number"),
    ("max_bound: 1_000\n", "'1_000' is not a YAML 1.2 number"),
    ("epsilon: &e 1\nbeta: *e\n", "anchors (&e) are not allowed"),
    (ALIAS_BOMB, "anchors (&a) are not allowed"),
    ("epsilon: 1\n<<: {epsilon: 10}\n", "unknown option '<<'"),
])
def test_a_config_that_could_change_privacy_silently_is_refused(tmp_path, text, fragment):
    with pytest.raises(Exception) as info:
        _load(tmp_path, text)
    assert fragment in str(info.value)


def test_the_alias_bomb_is_refused_fast_and_small(tmp_path):
    assert len(ALIAS_BOMB.encode()) < 600
    with pytest.raises(InputError, match="not allowed"):
        _load(tmp_path, ALIAS_BOMB)


def test_a_config_larger_than_the_limit_is_not_parsed(tmp_path):
    with pytest.raises(InputError, match="is larger than 64 KiB"):
        _load(tmp_path, "# padding\n" * (64 * 1024 // 10 + 1) + "epsilon: 1\n")


def test_yaml_12_numbers_and_booleans(tmp_path):
    got = _load(tmp_path, "epsilon: 1.5e-1\nmax_bound: 017\nrows: 0x10\nbeta: .05\nquiet: true\nseed: +3\n")
    assert got == {"epsilon": 0.15, "max_bound": 17, "rows": 16, "beta": 0.05, "quiet": True, "seed": 3}
    assert _load(tmp_path, "item_col: yes\n") == {"item_col": "yes"}  # YAML 1.2: text, not a boolean


def test_the_shipped_configs_read_as_before(tmp_path):
    import pathlib

    import yaml

    from dp_spark.config import parse_config

    for path in sorted(pathlib.Path(__file__).resolve().parents[2].joinpath("conf").glob("*.yaml")):
        text = path.read_text()
        assert parse_config(text, str(path)) == yaml.safe_load(text), path
