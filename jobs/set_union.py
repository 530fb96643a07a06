"""spark-submit entry point for the set-union release (DP Set Union).

    spark-submit jobs/set_union.py --config conf/set_union.yaml [--input ...] [--items-output ...]

Takes the same options as ``dp-spark set-union`` (see jobs/_entry.py).
"""

import sys

from _entry import run

if __name__ == "__main__":
    sys.exit(run("set-union"))
