"""GroupKeys: the keys of a grouped release in one Arrow array, in canonical order."""

import hashlib
import json
import random

import pyarrow as pa
import pytest

from dp_spark import keys as keys_module
from dp_spark.errors import ParameterError
from dp_spark.keys import GroupKeys
from dp_spark.ledger.budget import keys_digest
from dp_spark.plan import MAX_PUBLIC_GROUPS, public_keys


def random_strings(rng: random.Random, n: int) -> list[str]:
    alphabet = "aZ09 :-_é€𝄞中\u00a0"  # ASCII, Latin-1, BMP, astral: UTF-8 byte order must be code point order
    return list({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(n)})


def test_the_order_is_pythons_sort_of_the_values():
    rng = random.Random(3)
    words = random_strings(rng, 3000)
    assert list(GroupKeys.of(words, whole=False)) == sorted(words)
    numbers = rng.sample(range(-10**12, 10**12), 3000)
    assert list(GroupKeys.of(numbers, whole=True)) == sorted(numbers)
    shuffled = words[:]
    rng.shuffle(shuffled)
    assert GroupKeys.of(shuffled, whole=False) == GroupKeys.of(words, whole=False)  # the SET decides


def test_keys_are_cast_to_the_group_columns_type():
    assert list(GroupKeys.of(["12", "3"], whole=True)) == [3, 12]
    assert list(GroupKeys.of([12, 3], whole=False)) == ["12", "3"]  # str() spelling, code point order
    assert list(GroupKeys.of(pa.array(["b", "a"], pa.large_string()), whole=False)) == ["a", "b"]
    with pytest.raises(ParameterError, match="'x' is not one"):
        GroupKeys.of(["1", "x"], whole=True)
    with pytest.raises(ParameterError, match="same value"):
        GroupKeys.of(["1", "01"], whole=True)
    with pytest.raises(ParameterError, match="null"):
        GroupKeys.of(pa.array(["a", None]), whole=False)


@pytest.mark.parametrize("chunk", [1, 7, 65_536])
def test_the_digest_is_the_ledgers_digest_of_the_tuple(monkeypatch, chunk):
    # a keyed run's identity must not change when the keys move from a tuple to GroupKeys
    monkeypatch.setattr(keys_module, "_CHUNK", chunk)
    rng = random.Random(chunk)
    for values, whole in ((random_strings(rng, 50), False), (rng.sample(range(-999, 999), 40), True),
                          ([""], False), ([0], True)):
        keys = GroupKeys.of(values, whole)
        text = json.dumps([[type(k).__name__, k] for k in sorted(values)], ensure_ascii=False, separators=(",", ":"))
        written = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()  # the digest ledgers hold
        assert keys.digest() == keys_digest(tuple(sorted(values))) == keys_digest(keys) == written
    assert GroupKeys.of(["a", "b"], False).digest() != GroupKeys.of(["a", "c"], False).digest()


def test_a_sequence_read_by_index_and_in_chunks(monkeypatch):
    monkeypatch.setattr(keys_module, "_CHUNK", 3)
    keys = GroupKeys.of(range(10, 0, -1), whole=True)
    assert len(keys) == 10 and keys[0] == 1 and keys[-1] == 10 and keys[2:4] == [3, 4]
    assert list(keys) == list(range(1, 11)) and keys.head(4) == [1, 2, 3, 4] and keys.head(99) == list(range(1, 11))
    with pytest.raises(IndexError):
        keys[10]
    assert "10 whole-number keys" in repr(keys)


def test_a_list_of_keys_is_refused_above_the_releases_limit():
    assert len(public_keys(range(MAX_PUBLIC_GROUPS))) == MAX_PUBLIC_GROUPS
    with pytest.raises(ParameterError, match="at most 1,024 for this release"):
        public_keys(range(MAX_PUBLIC_GROUPS + 1))
    assert len(public_keys(range(5000), limit=keys_module.MAX_GROUP_KEYS)) == 5000


def test_a_refusal_names_the_key_it_refuses():
    with pytest.raises(ParameterError, match="the key ' 12' is not one"):
        GroupKeys.of(["3", " 12"], whole=True)
    with pytest.raises(ParameterError, match="64 bits"):
        GroupKeys.of([2**70], whole=True)
    with pytest.raises(ParameterError, match="UnicodeEncodeError"):
        GroupKeys.of(["a\ud800"], whole=False)
