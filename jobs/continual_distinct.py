"""spark-submit entry point for the continual-distinct release.

    spark-submit jobs/continual_distinct.py --config conf/continual_distinct.yaml [--input ...]
    spark-submit jobs/continual_distinct.py --config conf/continual_distinct.yaml --stream \
        --input /data/incoming/ --horizon 1024 --checkpoint /data/ckpt --sink /data/steps

Takes the same options as ``dp-spark continual-distinct`` (see jobs/_entry.py);
``--horizon`` is required with ``--input`` (the config file above sets 1024).
"""

import sys

from _entry import run

if __name__ == "__main__":
    sys.exit(run("continual-distinct"))
