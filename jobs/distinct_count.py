"""spark-submit entry point for the distinct-count release.

    spark-submit jobs/distinct_count.py --config conf/distinct_count.yaml [--input ...]

Takes the same options as ``dp-spark distinct-count`` (see jobs/_entry.py).
"""

import sys

from _entry import run

if __name__ == "__main__":
    sys.exit(run("distinct-count"))
