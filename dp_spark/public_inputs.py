"""Refusing a "public" input that is the private input.

A grouped release given public keys (``groups=`` / ``--groups``) releases every key, also one held by a
single person, with no DP key selection; top-k given a public domain (``domain=`` / ``--domain``) counts
every domain item without choosing items privately. Both are sound only when the keys or domain do not come
from the private data. When the "public" source is the private input (also under another name: a hard link,
:func:`same_files`), contains it (a folder holding an input file) or lies inside it,
:func:`refuse_private_as_public` refuses it with a one-line ParameterError naming the fix. The release
template (:func:`dp_spark.releases.template.run_release`) calls it before the keys or domain are read and
before anything is charged, and :func:`dp_spark.stages.item_counts.read_domain` before it reads a domain
file.

The decision depends only on paths and file identities (device and inode), never on rows or bytes: a copy of
the input cannot be told apart without reading the private bytes, which a refusal may not depend on. The
private input's locations are ``DataFrame.inputFiles()`` (listing reads no row); the public input's are its
path (made absolute, symlinks resolved, a local glob expanded; another file system's URI compared
lexically), a ``table:`` name's files, or a public DataFrame's ``inputFiles()``. A list of keys, or a
DataFrame built in memory, has no path and stays allowed (the caller's statement).
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from dp_spark.errors import ParameterError

_GLOB = re.compile(r"[*?\[{]")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")

#: What each public input is called, and the fix its refusal names.
_WHAT = {
    "groups": ("the public keys (groups= / --groups)",
               "give a file of public keys that is not the input, or omit groups= (--groups) to choose the "
               "keys privately"),
    "domain": ("the public domain (domain= / --domain)",
               "give a domain file that is not the input, or omit domain= (--domain) to run unknown-domain, "
               "which chooses the items privately"),
}


@dataclass(frozen=True)
class Location:
    """A normalised place on a file system: ``scheme`` "file" for a ``file:`` URI, "" for a bare path (Spark
    reads it from the default file system, unknown here: compared with any scheme), else the URI's scheme;
    ``authority`` the URI's host in lower case ("" when not given); ``parts`` the path's components;
    ``pattern``: the parts hold glob characters (matched per component with :func:`fnmatch.fnmatchcase`)."""

    scheme: str
    authority: str
    parts: tuple[str, ...]
    pattern: bool = False


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in posixpath.normpath(path).split("/") if p not in ("", "."))


def _local(path: str, scheme: str) -> Location:
    try:
        resolved = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    except (OSError, ValueError):  # a NUL byte: the reader refuses it
        resolved = os.path.abspath(path)
    return Location(scheme, "", _parts(resolved.replace(os.sep, "/")))


def locations_of_path(path: str) -> list[Location]:
    """The locations a path names: a local path or ``file:`` URI made absolute, symlinks resolved; a local
    glob's matches (Hadoop's ``{a,b}`` read as ``*``, as :func:`dp_spark.io.check_input_path` does; no
    match: the pattern itself); any other URI normalised as written (a glob kept as a pattern)."""
    text = str(path)
    if _URI.match(text) and not _WINDOWS.match(text) and not text.lower().startswith("file:"):
        url = urlparse(text)
        parts = _parts(unquote(url.path))
        return [Location(url.scheme.lower(), url.netloc.lower(), parts, bool(_GLOB.search(url.path)))]
    # a bare path: Spark reads it from the default file system (HDFS on a cluster?): compared by path
    scheme = "file" if text.lower().startswith("file:") else ""
    local = unquote(urlparse(text).path) if scheme else text
    if _GLOB.search(local) and not os.path.exists(local):
        matches = glob.glob(re.sub(r"\{[^{}]*\}", "*", os.path.expanduser(local)))
        if matches:
            return [_local(m, scheme) for m in sorted(matches)]
        return [Location(scheme, "", _local(local, scheme).parts, True)]
    return [_local(local, scheme)]


def locations_of_frame(frame) -> list[Location]:
    """The files a Spark DataFrame reads (``inputFiles()``: no row read), normalised; [] for a frame built
    in memory or when the client cannot say."""
    try:
        files = list(frame.inputFiles())
    except Exception:  # noqa: BLE001 - a source or client without inputFiles: nothing to compare
        return []
    return [loc for f in files for loc in locations_of_path(str(f))]


def locations_of(spark, source) -> list[Location]:
    """The locations of a public input: a path, a ``table:`` name (its files) or a Spark DataFrame (its
    files); [] for anything else (a list)."""
    if isinstance(source, str):
        if source.startswith("table:"):
            if spark is None:
                return []
            try:
                return locations_of_frame(spark.table(source.removeprefix("table:")))
            except Exception:  # noqa: BLE001 - an unknown table: the reader refuses it with its own message
                return []
        return locations_of_path(source)
    if hasattr(source, "inputFiles") and hasattr(source, "columns"):
        return locations_of_frame(source)
    return []


#: URI schemes that name one file system (Hadoop's S3 connectors).
_SAME_SCHEME = {"s3a": "s3", "s3n": "s3"}


def _host(authority: str) -> str:
    """A URI authority's host, without user or port (``hdfs://nn`` and ``hdfs://nn:8020`` are one file
    system)."""
    return authority.rsplit("@", 1)[-1].split(":", 1)[0]


def _same_file_system(a: Location, b: Location) -> bool:
    if "" in (a.scheme, b.scheme):
        return True  # a bare path on an unknown default file system: compared by path
    if _SAME_SCHEME.get(a.scheme, a.scheme) != _SAME_SCHEME.get(b.scheme, b.scheme):
        return False
    return not a.authority or not b.authority or _host(a.authority) == _host(b.authority)


def _prefix(short: Location, long: Location) -> bool:
    if len(short.parts) > len(long.parts):
        return False
    pairs = zip(short.parts, long.parts)
    if short.pattern or long.pattern:
        return all(fnmatch.fnmatchcase(y, x) if short.pattern else fnmatch.fnmatchcase(x, y) for x, y in pairs)
    return all(x == y for x, y in pairs)


def overlap(a: Location, b: Location) -> bool:
    """Whether ``a`` and ``b`` are the same place or one lies inside the other, on one file system."""
    return _same_file_system(a, b) and (_prefix(a, b) or _prefix(b, a))


def overlapping(public: list[Location], private: list[Location]) -> bool:
    """Whether any public location is, holds or lies inside a private one."""
    return any(overlap(p, q) for p in public for q in private)


def _local_files(locations: list[Location]) -> list[str]:
    """The files of the local locations that exist here (folders walked): names only, nothing read."""
    files = []
    for loc in locations:
        if loc.scheme not in ("", "file") or loc.pattern:
            continue
        path = "/" + "/".join(loc.parts)
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            files.extend(os.path.join(root, n) for root, _, names in os.walk(path) for n in names)
    return files


def same_files(public: list[Location], private: list[Location]) -> bool:
    """Whether a local public file is one of the private input's files under another name (a hard link, a
    bind mount: the same device and inode); file identities only, never bytes (module docstring)."""
    private_files = _local_files(private)
    if not private_files:
        return False
    inodes = set()
    for path in private_files:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            inodes.add((st.st_dev, st.st_ino))
    for path in _local_files(public):
        with contextlib.suppress(OSError):  # unreadable here: the reader says so
            st = os.stat(path)
            if (st.st_dev, st.st_ino) in inodes:
                return True
    return False


def _named(source) -> str:
    if isinstance(source, str):
        return repr(source if len(source) <= 160 else source[:157] + "...")
    return "a DataFrame read from the input's files"


def _refuse_overlap(private: list[Location], sources: dict, spark=None) -> None:
    """The refusal of :func:`refuse_private_as_public`; ``sources``: public input name -> its source."""
    for name, source in sources.items():
        if source is None or isinstance(source, (list, tuple)):
            continue
        public = locations_of(spark, source)
        if overlapping(public, private) or same_files(public, private):
            what, fix = _WHAT[name]
            raise ParameterError(
                f"{name}: {what} {_named(source)} is the private input (or a hard link to one of its files), "
                f"or a folder holding it, or lies inside it: its values would be released without differential "
                f"privacy; {fix}.")


def refuse_private_as_public(df, *, groups=None, domain=None) -> None:
    """Refuse (ParameterError naming the fix) a public keys source ``groups`` or public domain ``domain``
    that is, contains or lies inside the private input ``df`` (its files by ``inputFiles()``). Paths only;
    nothing is read or spent. A list, or a DataFrame built in memory, passes."""
    sources = {"groups": groups, "domain": domain}
    if all(s is None or isinstance(s, (list, tuple)) for s in sources.values()):
        return
    private = locations_of_frame(df)
    if private:
        _refuse_overlap(private, sources, getattr(df, "sparkSession", None))


def refuse_private_paths(input_path: str, *, groups=None, domain=None) -> None:
    """:func:`refuse_private_as_public` from paths alone, before Spark starts (the CLI's checks and dry
    run); a ``table:`` input is left to the release, which knows its files."""
    if not input_path or str(input_path).startswith("table:"):
        return
    sources = {k: v for k, v in {"groups": groups, "domain": domain}.items()
               if isinstance(v, str) and not v.startswith("table:")}
    _refuse_overlap(locations_of_path(str(input_path)), sources)
