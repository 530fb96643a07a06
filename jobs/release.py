"""spark-submit entry point for any release, named first.

    spark-submit jobs/release.py RELEASE [options of dp-spark RELEASE]
    spark-submit jobs/release.py top-k --config conf/top_k.yaml [--input ...]

Takes the same options as ``dp-spark RELEASE`` (see jobs/_entry.py); a
release of dp_spark.releases.RELEASES needs no script of its own.
"""

import sys

from _entry import run

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(f"usage: spark-submit {sys.argv[0]} RELEASE [options]: RELEASE is a dp-spark subcommand")
    sys.exit(run(sys.argv[1], sys.argv[2:]))
