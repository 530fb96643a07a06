"""Noise keyed per item, for mechanisms whose draws happen inside Spark (numpy only).

A draw made inside a distributed stage must not depend on partitioning or
batching, nor change when Spark re-runs a task or evaluates a DataFrame twice:
otherwise one item could get two draws, against the privacy analysis's one.
So every item's noise is keyed BLAKE2b (a pseudorandom function, RFC 7693) of
a secret 128-bit ``key`` (:func:`noise_key`, from the release's OS-seeded
generator), a ``stream`` name separating purposes (selection and count noise
never share a draw) and the item encoded injectively (:func:`encode_item`):
the same item always gets the same draw, and no one without the key can
predict it. :func:`keyed_normals` gives one N(0, 1) per item (Φ⁻¹ of a
uniform on a 2⁻⁵³ grid: the idealised Gaussian mechanism's guarantee, like
every floating-point sampler here); :func:`item_generator` a ChaCha20
generator per item, for exact samplers (:func:`dp_spark.noise.discrete_gaussian`).
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.noise.rng import SECURE_ROUNDS, check_rng
from randomgen import ChaCha

__all__ = ["noise_key", "encode_item", "item_digests", "keyed_uniforms", "keyed_normals", "item_generator"]

_KEY_WORDS = 4
_STREAM_BYTES = 16  # BLAKE2b's personalisation field


def noise_key(rng: np.random.Generator) -> tuple[int, ...]:
    """128 bits from ``rng`` (four 32-bit words): the secret of the noise
    drawn inside Spark. A seeded ``rng`` (tests only) gives a reproducible key."""
    rng = check_rng(rng)
    return tuple(int(x) for x in rng.integers(0, 2**32, size=_KEY_WORDS, dtype=np.uint64))


def _key_bytes(key) -> bytes:
    if (not isinstance(key, tuple) or len(key) != _KEY_WORDS
            or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and 0 <= k < 2**32 for k in key)):
        raise ParameterError("key must be a noise_key(rng) value: a tuple of four 32-bit words.")
    return b"".join(int(k).to_bytes(4, "big") for k in key)


def _stream_bytes(stream: str) -> bytes:
    raw = stream.encode("utf-8") if isinstance(stream, str) else b""
    if not raw or len(raw) > _STREAM_BYTES:
        raise ParameterError(f"stream must be a non-empty name of at most {_STREAM_BYTES} bytes; got {stream!r}.")
    return raw


def encode_item(item) -> bytes:
    """An injective byte encoding of an item: b"s" + UTF-8 for a string,
    b"i" + decimal digits for an integer (numpy integers included). Other
    types raise ParameterError (naming the type, never the value)."""
    if isinstance(item, str):
        return b"s" + item.encode("utf-8")
    if isinstance(item, numbers.Integral) and not isinstance(item, (bool, np.bool_)):
        return b"i" + str(int(item)).encode("ascii")
    raise ParameterError(
        f"items must be strings or integers to receive keyed noise; got type {type(item).__name__}."
    )


def item_digests(items, key, stream: str, size: int = 32) -> list[bytes]:
    """BLAKE2b(key, personalisation = ``stream``) of each encoded item:
    ``size`` bytes per item, a pseudorandom function of (key, stream, item)."""
    kb, sb = _key_bytes(key), _stream_bytes(stream)
    blake = hashlib.blake2b
    # fast path for the common str items; encode_item for everything else (same bytes)
    return [blake(b"s" + x.encode("utf-8") if type(x) is str else encode_item(x),
                  digest_size=size, key=kb, person=sb).digest() for x in items]


def keyed_uniforms(items, key, stream: str) -> np.ndarray:
    """One uniform in (0, 1) per item, float64 ((n + 1/2)·2⁻⁵³ for a
    pseudorandom 53-bit n): the same for the same (key, stream, item)."""
    digests = item_digests(items, key, stream, size=8)
    if not digests:
        return np.zeros(0, dtype=np.float64)
    words = np.frombuffer(b"".join(digests), dtype=">u8").astype(np.uint64)
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def keyed_normals(items, key, stream: str) -> np.ndarray:
    """One standard normal draw per item (Φ⁻¹ of :func:`keyed_uniforms`;
    |draw| <= 8.3 since u is never closer than 2⁻⁵⁴ to 0 or 1)."""
    from scipy.special import ndtri  # lazy: Spark workers load this; +130-370 ms a worker

    return ndtri(keyed_uniforms(items, key, stream))


def item_generator(item, key, stream: str) -> np.random.Generator:
    """A generator for one item, keyed by its 256-bit digest: the same
    stream for the same (key, stream, item), unrelated streams otherwise:
    ChaCha20 (:data:`dp_spark.noise.rng.SECURE_ROUNDS` rounds) keyed by the
    digest, so the draws are as unpredictable as the secret key."""
    (digest,) = item_digests([item], key, stream, size=32)
    return np.random.Generator(ChaCha(key=int.from_bytes(digest, "big"), rounds=SECURE_ROUNDS))
