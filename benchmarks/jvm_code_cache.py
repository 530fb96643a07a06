"""The session JVM's JIT options on many small, different releases (the test suite's shape).

Starts one local[2] session whose JVM gets ``--jvm-options`` (through ``SPARK_SUBMIT_OPTS``, as the
test suite sets them in tests/conftest.py), runs the transcript audit's releases (every release,
method and variant of tests/audit/test_transcript.py, ungrouped, with public keys and with keys
chosen privately, on its demo table) ``--rounds`` times, and prints each round's wall time and the
JVM's CPU seconds (/proc), then the JVM's code cache as ``jcmd <pid> Compiler.codecache`` reports it
(its size, what is used, whether the compiler was ever disabled because it was full). Compare two
option sets by running it twice, e.g.

    python -m benchmarks.jvm_code_cache --jvm-options="-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=48m"
    python -m benchmarks.jvm_code_cache --jvm-options="-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

(48 MB is what the JVM reserves when the JIT stops at its first tier. Give the options with ``=``: a
single option after a space would read as a flag of this script.) Seeded releases (NOT for
publication); nothing printed is a release's value.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time

from benchmarks._common import command_line, session_summary, start_session
from benchmarks.worker_gc import _tree_cpu

DEFAULT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
GROUPINGS = ("ungrouped", "public-m", "private-m")


def _jvm_pid(root: int) -> int | None:
    """The java process among ``root``'s children (the session's JVM)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                first = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if ppid == root and first.endswith("java"):
            return int(name)
    return None


def _code_cache(pid: int | None) -> str:
    if pid is None or shutil.which("jcmd") is None:
        return "(no jcmd or no JVM found: code cache not read)"
    out = subprocess.run(["jcmd", str(pid), "Compiler.codecache"], capture_output=True, text=True, timeout=60)
    return "\n".join(line.strip() for line in out.stdout.splitlines()[1:] if line.strip())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--jvm-options", default=DEFAULT_OPTIONS,
                        help=f"the session JVM's options (SPARK_SUBMIT_OPTS; default {DEFAULT_OPTIONS!r})")
    args = parser.parse_args(argv)

    from tests.audit import test_transcript as transcript
    from tests.conftest import TEST_CONF  # (its import adds the suite's JIT options to SPARK_SUBMIT_OPTS)

    from dp_spark.errors import DPSparkError
    from dp_spark.releases import RELEASES

    os.environ["SPARK_SUBMIT_OPTS"] = args.jvm_options  # exactly these: read by spark-submit as the JVM starts
    spark = start_session("jvm_code_cache", {k: v for k, v in TEST_CONF.items() if k != "spark.driver.memory"})
    tables = {kind: [spark.createDataFrame(make(added)).cache() for added in (False, True)]
              for kind, make in (("persons", transcript.persons_table), ("events", transcript.events_table))}
    for pair in tables.values():
        for frame in pair:
            frame.count()
    cases = [case.values for case in transcript.CASES if case.values[2] in GROUPINGS]
    jvm = _jvm_pid(os.getpid())

    print(f"# jvm_code_cache: {len(cases)} releases a round, {args.rounds} rounds; {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"# {command_line()}; SPARK_SUBMIT_OPTS={args.jvm_options!r}; {session_summary(spark)}")
    print(f"{'round':>5s} {'wall s':>8s} {'JVM CPU s':>10s}")
    for round_ in range(args.rounds):
        before, start = _tree_cpu(os.getpid()), time.perf_counter()
        for name, extra, grouping in cases:
            spec = RELEASES[name]
            try:  # round r: the demo table or its neighbour, a seed of its own
                spec.function(tables[spec.example.input][round_ % 2],
                              **transcript.case_parameters(name, extra, grouping), seed=11 + round_)
            except DPSparkError:
                pass  # a form the plan refuses (the transcript compares refusals too): cheap
        wall = time.perf_counter() - start
        print(f"{round_:5d} {wall:8.1f} {_tree_cpu(os.getpid())['jvm'] - before['jvm']:10.1f}", flush=True)
    print(f"# load after {os.getloadavg()[0]:.1f}; the JVM's code cache:")
    print(_code_cache(jvm))
    spark.stop()


if __name__ == "__main__":
    main()
