"""Random generators for the mechanism layer.

Every privacy-protecting draw in dp_spark comes from a ``numpy.random.Generator``
passed explicitly as ``rng``. In production the root generator is seeded from
operating-system entropy (``make_rng()``), and independent children are spawned
from it for each mechanism or Spark partition (``spawn_rngs``), so no noise draw
is ever reused across items or partitions. A fixed integer seed exists only for
tests and demos: a seeded release is reproducible by anyone who knows the seed
and therefore carries no privacy guarantee.

Bit generator. An unseeded generator — every publishable
release — is **ChaCha20** (``randomgen.ChaCha``, 20 rounds: the stream cipher
of RFC 8439, also behind Linux's ``getrandom`` and OpenSSL's and BoringSSL's
ChaCha20 DRBGs), keyed from 256 bits of OS entropy (``secrets``) through a
256-bit ``SeedSequence`` pool, so that spawning works as for numpy's own bit
generators: a child's key is derived from the same secret entropy and its
spawn key, and a child of a ChaCha20 generator is a ChaCha20 generator
(:func:`secure_generator`). numpy's PCG64 is a fast statistical generator,
not a cryptographic one: its state can be recovered from its outputs, and
with it every later draw. ChaCha20 was chosen over randomgen's AESCounter
because it is fast in software on every CPU (SIMD, constant time), while
AESCounter is fast only with AES-NI and falls back to table-based software
AES elsewhere; ``randomgen`` is maintained by numpy.random's author, and
its generators plug into ``numpy.random.Generator`` unchanged.

A seeded generator (tests and demos only, refused unless asked for) stays
numpy's PCG64 with ``SeedSequence(seed)``: a seeded output is not private
whatever generator made it, and keeping PCG64 keeps every seeded output of
dp_spark identical to earlier versions (the tests, the benchmarks' common
random numbers and saved seeded checkpoints compare them).
"""

from __future__ import annotations

import numbers
import secrets
import threading
from dataclasses import dataclass, field

import numpy as np
from randomgen import ChaCha

from dp_spark import checks
from dp_spark.errors import ParameterError

__all__ = ["make_rng", "spawn_rngs", "check_rng", "secure_generator", "first_use_generator", "SECURE_ROUNDS",
           "StreamRoot"]

#: ChaCha rounds of every unseeded generator (the standard ChaCha20).
SECURE_ROUNDS = 20
#: Bits of OS entropy keying an unseeded generator (ChaCha's key size).
_ENTROPY_BITS = 256


def secure_generator(seed_seq: np.random.SeedSequence | None = None) -> np.random.Generator:
    """A ChaCha20 ``Generator``. With no argument its key comes from 256
    bits of OS entropy (``secrets.randbits``) through a 256-bit SeedSequence
    pool (so ``Generator.spawn`` gives ChaCha20 children). Passing a
    SeedSequence is for tests and benchmarks that compare generators."""
    if seed_seq is None:
        seed_seq = np.random.SeedSequence(secrets.randbits(_ENTROPY_BITS), pool_size=_ENTROPY_BITS // 32)
    return np.random.Generator(ChaCha(seed_seq, rounds=SECURE_ROUNDS))



def make_rng(seed: int | None = None) -> np.random.Generator:
    """Return a new random generator.

    With ``seed=None`` (the default, and the only setting fit for publication)
    the generator is ChaCha20 keyed from operating-system entropy
    (:func:`secure_generator`), so two calls give unrelated streams and no
    one can predict a draw from earlier ones.

    A non-negative integer ``seed`` gives a reproducible generator. Use it
    only in tests and demos: anyone who knows the seed can recompute the noise
    and subtract it, so a seeded output is *not* differentially private. It
    is numpy's PCG64, as in earlier versions, so seeded outputs are unchanged.
    """
    if seed is None:
        return secure_generator()
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ParameterError(
            f"seed must be None (OS entropy) or a non-negative int, got {type(seed).__name__}; "
            "pass seed=None for a release you intend to publish"
        )
    if seed < 0:
        raise ParameterError("seed must be a non-negative int (or None for OS entropy)")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))


def spawn_rngs(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Return ``n`` statistically independent child generators of ``rng``.

    The children come from ``SeedSequence.spawn`` on ``rng``'s seed sequence
    (``Generator.spawn``), so they are independent of each other and of the
    parent's own stream, and repeated calls give fresh children. Use one child
    per mechanism or per Spark partition. Children of a seeded generator are
    reproducible (tests only).
    """
    check_rng(rng)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ParameterError(
            f"n must be a non-negative int (number of child generators), got {n!r}"
        )
    n = int(n)
    if isinstance(rng.bit_generator, ChaCha):  # keep the rounds explicit: never a weaker child
        rounds = rng.bit_generator.state["state"]["rounds"]
        children = rng.bit_generator.seed_seq.spawn(n)
        return [np.random.Generator(ChaCha(child, rounds=rounds)) for child in children]
    if hasattr(rng, "spawn"):
        return list(rng.spawn(n))
    seed_seq = rng.bit_generator.seed_seq  # numpy < 1.25
    bit_generator_type = type(rng.bit_generator)
    return [np.random.Generator(bit_generator_type(child)) for child in seed_seq.spawn(n)]


class _FirstUseGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` on a given bit generator that runs a
    callback once, before the first read of ANY of its attributes (every
    draw method, ``bit_generator``, ``spawn``, ``__reduce__`` for pickling,
    ``__class__`` …). A draw of it goes through such a read, so the callback
    completes before the first value is drawn; if it raises, nothing is
    drawn and the next read calls it again. Children it spawns are plain
    generators (their parent was read, so the callback ran)."""

    def __init__(self, bit_generator, on_first_use=None) -> None:
        super().__init__(bit_generator)
        state = object.__getattribute__(self, "__dict__")
        state["_on_first_use"], state["_first_use_lock"] = on_first_use, threading.Lock()

    def __getattribute__(self, name):
        state = object.__getattribute__(self, "__dict__")
        if state.get("_on_first_use") is not None:
            with state["_first_use_lock"]:
                callback = state.get("_on_first_use")
                if callback is not None:
                    callback()  # raises: the read fails, nothing is drawn
                    state["_on_first_use"] = None
        return object.__getattribute__(self, name)

    def spawn(self, n_children):
        return [np.random.Generator(child.bit_generator) for child in super().spawn(n_children)]


def first_use_generator(rng: np.random.Generator, on_first_use) -> np.random.Generator:
    """``rng``'s stream (the same bit generator: the draws are those
    ``rng`` would make) as a Generator that calls ``on_first_use()`` once,
    before anything is read from it: the release template marks a keyed
    ledger run 'drawn' there (:func:`dp_spark.ledger.budget.draw_mark`), so
    the mark is committed before the run's first privacy draw however the
    release draws (a sampler, ``spawn_rngs``, a child key, scipy's
    ``random_state``). ``on_first_use=None``: ``rng`` itself. Use the
    returned generator only: ``rng`` shares its stream."""
    check_rng(rng)
    if on_first_use is None:
        return rng
    return _FirstUseGenerator(rng.bit_generator, on_first_use)


check_rng = checks.rng  # one rule for every sampler (dp_spark.checks)


@dataclass(frozen=True)
class StreamRoot:
    """One release's source of independent streams indexed by a PUBLIC number (a group's index in
    the canonical keys, a noise bucket), so each unit's draws do not depend on where it runs (driver
    or executor, which task, how many partitions) nor on how often Spark runs it. Picklable: a task
    closure carries it to the executors.

    Unseeded (every publishable release): ``secret`` is a 256-bit key drawn on the driver from the
    release's ChaCha20 generator (so a keyed ledger run is marked drawn first), and stream i is the
    ChaCha20 keystream under that key from counter i·2⁶⁴ (randomgen's 128-bit counter counts 32-bit
    words; a stream would need 2⁶³ 64-bit draws to reach the next one's start): disjoint blocks of
    one ChaCha20 keystream, so the streams are independent and unpredictable to anyone without the
    key (ChaCha20 as a pseudorandom function, as for the release's own generator). A re-executed
    task — a retry, a speculative copy, a zombie attempt after a fetch failure, a second evaluation
    of the DataFrame — draws exactly the same values, so no unit ever gets two different draws (the
    analysis counts one). The key exists only in this object: it is not in its ``repr``, never
    logged, never in a job description, a plan or a DataFrame column; it travels to the executors
    inside the pickled task closure, as the count-release's item key does
    (:mod:`dp_spark.mechanisms.count_release.keyed`; what Spark exposes of closures is in
    docs/security.md).
    Seeded (tests and demos only, not private): ``entropy`` and ``spawn_key`` are a child
    ``SeedSequence`` of the release's seeded generator, and stream i is PCG64 on its child with spawn
    key ``spawn_key + (i,)``: reproducible by anyone with the seed (seeded outputs as before)."""

    entropy: int | tuple[int, ...] | None
    spawn_key: tuple[int, ...] = ()
    secret: int | None = field(default=None, repr=False, hash=False)  # hash(int) would reveal it

    @classmethod
    def of(cls, rng: np.random.Generator, seeded: bool) -> "StreamRoot":
        """The root of a release whose generator is ``rng``: a child of ``rng`` is spawned (reading
        ``rng``, so a keyed ledger run is marked drawn first) and read by :meth:`from_child`."""
        (child,) = spawn_rngs(check_rng(rng), 1)
        return cls.from_child(child, seeded)

    @classmethod
    def from_child(cls, child: np.random.Generator, seeded: bool) -> "StreamRoot":
        """The root read from ``child``, a generator of the release's own (spawned for this root
        only): ``seeded`` its SeedSequence state, else a 256-bit key drawn from it."""
        check_rng(child)
        if not seeded:
            words = child.integers(0, 2**64, size=_ENTROPY_BITS // 64, dtype=np.uint64)
            return cls(None, (), int.from_bytes(words.astype(">u8").tobytes(), "big"))
        sequence = child.bit_generator.seed_seq
        raw = sequence.entropy
        entropy = int(raw) if isinstance(raw, (int, np.integer)) else tuple(int(v) for v in raw)
        return cls(entropy, tuple(int(v) for v in sequence.spawn_key))

    @property
    def seeded(self) -> bool:
        """True when the streams are reproducible from a seed (tests and demos only)."""
        return self.entropy is not None

    def stream(self, index: int) -> np.random.Generator:
        """The generator of unit ``index`` (0 <= index < 2⁶⁴): unseeded, ChaCha20 under the root's
        key from counter index·2⁶⁴; seeded, PCG64 on the SeedSequence child ``spawn_key + (index,)``.
        The same generator every call. Draw from it; never spawn from it (an unseeded stream's
        children would be keyed by fresh OS entropy: other draws on every re-run task)."""
        index = int(index)
        if not 0 <= index < 2**64:
            raise ParameterError("a stream index is an int in [0, 2**64)")
        if self.entropy is not None:
            child = np.random.SeedSequence(self.entropy, spawn_key=(*self.spawn_key, index))
            return np.random.Generator(np.random.PCG64(child))
        if self.secret is None:
            raise ParameterError("this StreamRoot has neither a seed nor a key: make it with StreamRoot.of")
        return np.random.Generator(ChaCha(key=self.secret, counter=index << 64, rounds=SECURE_ROUNDS))
