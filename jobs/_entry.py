"""What every spark-submit entry script in jobs/ shares.

Makes ``dp_spark`` importable when running from a checkout that was not
installed, then runs the same command line as ``dp-spark <release>``. Under
spark-submit the session spark-submit created is used as it is. The
executors' Python needs dp_spark too: install it on the cluster, or pass a
zip of it with ``--py-files``.
"""

import os
import sys


def run(command: str) -> int:
    try:
        import dp_spark  # noqa: F401
    except ImportError:  # a checkout without installing
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from dp_spark.cli import main

    return main([command, *sys.argv[1:]])
