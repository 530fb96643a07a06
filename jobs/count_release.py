"""spark-submit entry point for the count-release (Private Count Release).

    spark-submit jobs/count_release.py --config conf/count_release.yaml [--input ...]

Takes the same options as ``dp-spark count-release`` (see jobs/_entry.py).
"""

import sys

from _entry import run

if __name__ == "__main__":
    sys.exit(run("count-release"))
