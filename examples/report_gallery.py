"""Render the HTML report of every release on built-in demo data (and of a
grouped distinct-count, whose page has small multiples), and (optionally)
screenshot each page with headless Chromium.

    .venv/bin/python examples/report_gallery.py --out out/gallery --screenshots docs/img

The releases are seeded (demo only: a seeded report says it is not private).
Screenshots need Debian's ``chromium`` (``apt-get install -y chromium``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
)


def demo_releases(spark, rows: int = 20_000, seed: int = 1) -> dict:
    """One seeded release of each kind in ``dp_spark.releases.RELEASES``, its
    registry example (``ReleaseSpec.example``) on the built-in synthetic
    tables: a new release is in the gallery without an entry here."""
    import dp_spark
    from dp_spark.continual_data import synthetic_stream
    from dp_spark.datasets import synthetic_events
    from dp_spark.releases import RELEASES

    tables = {"persons": lambda parameters: events,
              "events": lambda parameters: synthetic_stream(spark, items=rows // 10, horizon=parameters["horizon"],
                                                            max_flippancy=8)}
    events = synthetic_events(spark, rows=rows).cache()
    out = {}
    for name, spec in RELEASES.items():
        parameters = dict(spec.example.parameters)
        release = getattr(dp_spark, spec.python_name)
        out[name] = release(tables[spec.example.input](parameters), **parameters, seed=seed)
    return out


#: The grouped page's public keys: 16 regions of unequal size, more than the
#: page's small multiples (dp_spark.html_report.SMALL_MULTIPLES), so it shows
#: the largest first.
GROUPED_KEYS = tuple(f"region-{i:02d}" for i in range(16))


def grouped_demo(spark, rows: int = 20_000, seed: int = 1) -> dict:
    """A seeded grouped distinct-count (issue 24) on the built-in persons
    table: each person in one region (a fixed hash of the id; unequal
    sizes), public keys, ``max_groups=1`` (every region the full ε)."""
    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.datasets import synthetic_events

    bucket = F.pmod(F.xxhash64(F.col("person_id")), F.lit(100))
    region = F.format_string("region-%02d", F.floor(F.sqrt(bucket) * 1.6).cast("int"))
    events = synthetic_events(spark, rows=rows).withColumn("region", region)
    release = dp_spark.distinct_count(events, epsilon=1.0, group_by="region", groups=list(GROUPED_KEYS),
                                      max_groups=1, seed=seed)
    return {"distinct-count-grouped": release}


def write_pages(releases: dict, out_dir: str | os.PathLike) -> dict:
    """Write ``<release>.html`` for each release; return name -> path."""
    from dp_spark.html_report import write_html

    out = Path(out_dir)
    paths = {}
    for name, release in releases.items():
        paths[name] = out / f"{name}.html"
        write_html(paths[name], release)
    return paths


def chromium() -> str | None:
    """The Chromium binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: str | os.PathLike, png: str | os.PathLike, width: int = 900, height: int = 1400,
               timeout: float = 120) -> None:
    """Screenshot a local HTML page with headless Chromium (its own throwaway profile)."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="dp_spark_chromium_") as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={Path(png).resolve()}",
               f"--window-size={width},{height}", Path(html).resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not Path(png).is_file():
        raise RuntimeError(f"chromium failed (exit {proc.returncode}): {proc.stderr[-2000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out/gallery", help="directory for the HTML pages")
    parser.add_argument("--screenshots", help="directory for one PNG per release (needs chromium)")
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from dp_spark.session import get_session

    spark = get_session(master="local[2]", log_level="ERROR")
    pages = write_pages({**demo_releases(spark, rows=args.rows), **grouped_demo(spark, rows=args.rows)}, args.out)
    for name, page in pages.items():
        print(f"{name}: {page}")
        if args.screenshots:
            png = Path(args.screenshots) / f"report-{name}.png"
            png.parent.mkdir(parents=True, exist_ok=True)
            screenshot(page, png)
            print(f"  screenshot {png}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
