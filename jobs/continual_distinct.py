"""spark-submit entry point for the continual-distinct release.

    spark-submit jobs/continual_distinct.py --config conf/continual_distinct.yaml [--input ...]
    spark-submit jobs/continual_distinct.py --config conf/continual_distinct.yaml --stream \
        --input /data/incoming/ --horizon 1024 --checkpoint /data/ckpt --sink /data/steps

Takes the same options as ``dp-spark continual-distinct``. Under spark-submit the
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
    sys.exit(main(["continual-distinct", *sys.argv[1:]]))
