"""spark-submit entry point for the top-k release.

    spark-submit jobs/top_k.py --config conf/top_k.yaml [--input ...]

Takes the same options as ``dp-spark top-k`` (see jobs/_entry.py).
"""

import sys

from _entry import run

if __name__ == "__main__":
    sys.exit(run("top-k"))
