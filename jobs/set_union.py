"""spark-submit entry point for the set-union release (DP Set Union).

    spark-submit jobs/set_union.py --config conf/set_union.yaml [--input ...] [--items-output ...]

Takes the same options as ``dp-spark set-union``. Under spark-submit the
session spark-submit created is used as it is. The ``dp_spark`` package must
be importable by the driver and the executors' Python: install it on the
cluster, or pass a zip of it with ``--py-files``.
"""

import os
import sys

try:
    import dp_spark  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dp_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["set-union", *sys.argv[1:]]))
