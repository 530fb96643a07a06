"""``dp-spark sample-data DIR``: write the small sample inputs the README's recipes read, so a newcomer can
run every recipe in order (``dp-spark sample-data samples && cd samples``).

The data is **synthetic and public**: drawn with numpy from fixed seeds (no person's data is in it) and
written with pyarrow, without Spark; the same version writes the same bytes every time. :data:`FILES` lists
the files in order (ratings shaped like MovieLens 100K with a genre column, the movie ids as a public
domain, the genres and the countries as public group keys, page views with a country, words per person, an
insert/delete stream); each builder's description says what its file holds.

Beside them it writes ``.dp_spark_sample_data.json`` (the SHA-256 of each file) and, in a folder it creates,
``.gitignore`` (``*``; an existing folder, perhaps the user's repository, gets none unless an earlier run
wrote it). Into an existing folder it writes only if every file it would replace is its own earlier output
(the bytes it writes now, or those its record names); otherwise it refuses before writing anything (exit 2).
Files of other names are left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from dp_spark.datasets import COUNTRIES, COUNTRY_PERCENT
from dp_spark.errors import InputError

NAME = "sample-data"
HELP = ("write small synthetic, public sample inputs (the files the README's recipes read) into a folder, "
        "without Spark")
DESCRIPTION = (
    "Write the sample inputs the README's recipes read into DIR (created if missing): ratings.parquet "
    "(user, movie, rating, genre), movies.txt, genres.csv, events.parquet (user_id, url, country), keys.csv "
    "(the countries, also the built-in data's), words.parquet (person_id, item) and stream.parquet (time, "
    "item, op). The data is synthetic and public (numpy draws from fixed seeds, no person's data), the same "
    "every run, written in seconds without Spark. A file of one of these names already in DIR is replaced "
    "only if an earlier sample-data run wrote it; anything else is refused before anything is written.")

#: The record of what the command wrote (name -> SHA-256), in DIR.
RECORD = ".dp_spark_sample_data.json"
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = "# written by dp-spark sample-data: synthetic sample inputs, kept out of git\n*\n"

# Shapes (public constants; the README's recipes name some: --persons 943, --horizon 4096).
USERS, MOVIES, MIN_RATINGS, MAX_RATINGS = 943, 1_682, 20, 737
GENRES = ("Drama", "Comedy", "Action", "Thriller", "Romance", "Adventure", "Sci-Fi", "Crime", "Horror",
          "Children")
GENRE_WEIGHTS = (25, 20, 13, 10, 9, 7, 6, 4, 3, 3)
RATING_WEIGHTS = (6, 11, 27, 34, 22)  # stars 1..5, in percent
EVENT_USERS, EVENT_ROWS, PAGES = 5_000, 40_000, 1_500
WORD_PERSONS, WORD_ROWS, VOCABULARY = 4_000, 40_000, 3_000
STREAM_ITEMS, HORIZON, MAX_FLIPS = 1_500, 4_096, 6
SYLLABLES = ("ba", "ko", "mi", "ne", "ru", "sa", "to", "vi", "de", "fa", "go", "hu", "ja", "le", "po", "zu")


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP, description=DESCRIPTION)
    p.add_argument("directory", metavar="DIR", help="folder to write the sample files into (created if missing)")


@dataclass(frozen=True)
class SampleFile:
    name: str
    build: Callable  # rng -> (bytes, one-line description)


def _rng(name: str):
    """A generator per file, seeded by its name, so one file's shape can change without changing the others."""
    return np.random.default_rng([20261129, zlib.crc32(name.encode())])


def _power_law(n: int, exponent: float) -> np.ndarray:
    """Probabilities of ranks 0..n-1 proportional to (rank+1)^-exponent."""
    weights = np.arange(1, n + 1, dtype=float) ** -exponent
    return weights / weights.sum()


def _weights(percent) -> np.ndarray:
    weights = np.asarray(percent, dtype=float)
    return weights / weights.sum()


def _parquet(columns: dict) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink, compression="snappy")
    return sink.getvalue()


def _lines(lines) -> bytes:
    """Text, one value a line (a one-column CSV when the first is its header)."""
    return ("\n".join(lines) + "\n").encode()


def _movie_genres():
    """Each movie's genre (index into GENRES), a fixed function of the movie."""
    return _rng("movie genres").choice(len(GENRES), size=MOVIES, p=_weights(GENRE_WEIGHTS))


def _ratings(rng):
    import pyarrow as pa

    # Activity: at least MIN_RATINGS each, a heavy (Pareto) tail; popularity: a power law over shuffled ids.
    counts = np.minimum(MIN_RATINGS + (rng.pareto(1.3, USERS) * 25).astype(int), MAX_RATINGS)
    popularity = np.empty(MOVIES)
    popularity[rng.permutation(MOVIES)] = _power_law(MOVIES, 0.9)
    users, movies = [], []
    for user, count in enumerate(counts, start=1):
        users.append(np.full(count, user, dtype=np.int32))
        movies.append(rng.choice(MOVIES, size=count, replace=False, p=popularity).astype(np.int32) + 1)
    user, movie = np.concatenate(users), np.concatenate(movies)
    rating = rng.choice(5, size=len(user), p=_weights(RATING_WEIGHTS)).astype(np.int8) + 1
    genre = np.asarray(GENRES, dtype=object)[_movie_genres()[movie - 1]]
    data = _parquet({"user": user, "movie": movie, "rating": rating, "genre": pa.array(genre, pa.string())})
    return data, (f"{len(user):,} movie ratings (user, movie, rating, genre) by {USERS:,} users of "
                  f"{MOVIES:,} movies, {len(GENRES)} genres")


def _movies(rng):
    return _lines(str(m) for m in range(1, MOVIES + 1)), (
        f"the {MOVIES:,} movie ids, one per line: the public domain (top-k --domain)")


def _genres(rng):
    return _lines(("genre", *GENRES)), f"the {len(GENRES)} genres (column genre): public keys for --group-by genre"


def _events(rng):
    import pyarrow as pa

    country_of_user = rng.choice(len(COUNTRIES), size=EVENT_USERS, p=_weights(COUNTRY_PERCENT))
    user = rng.choice(EVENT_USERS, size=EVENT_ROWS, p=_power_law(EVENT_USERS, 0.7))
    page = rng.choice(PAGES, size=EVENT_ROWS, p=_power_law(PAGES, 1.1))
    url = [f"https://shop.example.com/p/{p}" for p in page]
    data = _parquet({"user_id": (user + 1).astype(np.int64), "url": pa.array(url, pa.string()),
                     "country": pa.array(np.asarray(COUNTRIES, dtype=object)[country_of_user[user]], pa.string())})
    return data, (f"{EVENT_ROWS:,} page views (user_id, url, country) of {len(np.unique(user)):,} users on "
                  f"{len(np.unique(page)):,} pages, {len(COUNTRIES)} countries")


def _keys(rng):
    return _lines(("country", *COUNTRIES)), (f"the {len(COUNTRIES)} countries (column country): public keys for "
                                        "--group-by country, of events.parquet and of the built-in data")


def _made_up_words(rng, n: int) -> list[str]:
    """``n`` distinct made-up words of one to three syllables, in a seeded order."""
    s = len(SYLLABLES)
    words = [SYLLABLES[i] for i in range(s)]
    words += [SYLLABLES[i] + SYLLABLES[j] for i in range(s) for j in range(s)]
    words += [SYLLABLES[i] + SYLLABLES[j] + SYLLABLES[k] for i in range(s) for j in range(s) for k in range(s)]
    order = rng.permutation(len(words))[:n]
    return [words[i] for i in order]


def _words(rng):
    import pyarrow as pa

    vocabulary = np.asarray(_made_up_words(rng, VOCABULARY), dtype=object)
    person = rng.choice(WORD_PERSONS, size=WORD_ROWS, p=_power_law(WORD_PERSONS, 0.7))
    word = rng.choice(VOCABULARY, size=WORD_ROWS, p=_power_law(VOCABULARY, 1.05))
    data = _parquet({"person_id": (person + 1).astype(np.int64), "item": pa.array(vocabulary[word], pa.string())})
    return data, (f"{WORD_ROWS:,} words used (person_id, item) by {len(np.unique(person)):,} persons, "
                  f"{len(np.unique(word)):,} distinct made-up words")


def _stream(rng):
    import pyarrow as pa

    times, items, ops = [], [], []
    for item in range(STREAM_ITEMS):
        flips = min(int(rng.geometric(0.45)), MAX_FLIPS)
        steps = np.sort(rng.choice(np.arange(1, HORIZON + 1), size=flips, replace=False))
        times.append(steps.astype(np.int32))
        items += [f"listing-{item:05d}"] * flips
        ops.append(np.where(np.arange(flips) % 2 == 0, 1, -1).astype(np.int32))
    time, op = np.concatenate(times), np.concatenate(ops)
    order = np.argsort(time, kind="stable")
    data = _parquet({"time": time[order], "item": pa.array(np.asarray(items, dtype=object)[order], pa.string()),
                     "op": op[order]})
    return data, (f"{len(time):,} insert/delete events (time, item, op) of {STREAM_ITEMS:,} listings over steps "
                  f"1..{HORIZON:,} (continual-distinct --horizon {HORIZON})")


#: What the command writes, in order (each README recipe reads one or more of these).
FILES = (
    SampleFile("ratings.parquet", _ratings),
    SampleFile("movies.txt", _movies),
    SampleFile("genres.csv", _genres),
    SampleFile("events.parquet", _events),
    SampleFile("keys.csv", _keys),
    SampleFile("words.parquet", _words),
    SampleFile("stream.parquet", _stream),
)


def sample_files() -> list[tuple[str, bytes, str]]:
    """(name, bytes, description) of every sample file, in :data:`FILES` order; the same bytes on every
    call."""
    return [(f.name, *f.build(_rng(f.name))) for f in FILES]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _recorded(folder: Path) -> dict:
    """The record an earlier run left in ``folder`` (name -> SHA-256), or {}."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}


def _foreign(folder: Path, planned: dict[str, bytes]) -> list[str]:
    """The names among ``planned`` that exist in ``folder`` and are not this command's earlier output (the
    same bytes now, or those its record names); a folder, a link or an unreadable file is foreign."""
    recorded = _recorded(folder)
    foreign = []
    for name, data in planned.items():
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_file():
            foreign.append(name)
            continue
        try:
            digest = _digest(path.read_bytes())
        except OSError:
            foreign.append(name)
            continue
        if digest != _digest(data) and digest != recorded.get(name):
            foreign.append(name)
    return foreign


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file beside ``path`` (mode from the umask) and rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_samples(directory: str) -> list[str]:
    """Write the sample files into ``directory`` (created if missing); return one line per data file (its
    path and what it holds). Raises :class:`InputError`, with nothing written, for a path that is not a
    folder, a folder that cannot be written, or a file of a sample's name that this command did not write."""
    if not str(directory).strip():
        raise InputError("sample-data needs a folder name (DIR), e.g. dp-spark sample-data samples.")
    folder = Path(directory)
    if (folder.exists() or folder.is_symlink()) and not folder.is_dir():
        raise InputError(f"sample-data: {directory!r} is not a folder; give a new or existing folder (DIR).")
    files = sample_files()
    record = {"written_by": "dp-spark sample-data", "files": {name: _digest(data) for name, data, _ in files}}
    planned = {name: data for name, data, _ in files}
    if not folder.exists() or (folder / GITIGNORE).exists():  # a folder of the user's is not hidden from git
        planned[GITIGNORE] = GITIGNORE_TEXT.encode()  # an existing one is rewritten only if ours
    if folder.is_dir():
        foreign = _foreign(folder, planned)
        if ((folder / RECORD).exists() or (folder / RECORD).is_symlink()) and not _recorded(folder):
            foreign.append(RECORD)
        if foreign:
            shown = ", ".join(str(folder / name) for name in foreign)
            raise InputError(f"sample-data: {shown} already exist{'s' if len(foreign) == 1 else ''} and "
                             f"{'was' if len(foreign) == 1 else 'were'} not written by dp-spark sample-data; "
                             f"nothing was written: move {'it' if len(foreign) == 1 else 'them'} away or give "
                             "another folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in planned.items():
            _write_atomically(folder / name, data)
        _write_atomically(folder / RECORD, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise InputError(f"sample-data: cannot write into {directory!r} "
                         f"({exc.strerror or type(exc).__name__}); give a folder you can write.") from None
    return [f"{folder / name}: {description}" for name, _, description in files]


def run(args) -> int:
    for line in write_samples(args.directory):
        print(line)
    return 0
