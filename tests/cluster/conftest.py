"""A real Spark standalone cluster (one master, one worker) on loopback.

Started with the pyspark wheel's ``sbin/spark-daemon.sh`` (the wheel has no
start-master.sh / start-worker.sh), on ports chosen at run time, with its pid,
log and work directories in a pytest temporary directory. Only the daemons
started here are stopped again (by the pids recorded at start), also when a
test or the start-up itself fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
IDENT = "dp_spark_cluster_test"  # SPARK_IDENT_STRING: names the pid and log files

START_TIMEOUT = 90  # seconds for the master to listen and the worker to register
STOP_TIMEOUT = 20  # seconds for a daemon to exit after SIGTERM before SIGKILL


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together, so distinct)."""
    with ExitStack() as stack:
        socks = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    master_url: str
    spark_home: Path
    env: dict[str, str]
    base: Path
    log_dir: Path
    work_dir: Path
    master_log: Path | None = None
    worker_log: Path | None = None
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def spark_submit(self) -> str:
        return str(self.spark_home / "bin" / "spark-submit")

    def app_dirs(self) -> list[Path]:
        """Application directories the worker created for its executors."""
        return sorted(p for p in self.work_dir.glob("app-*") if p.is_dir())

    def master_registered_apps(self) -> list[str]:
        text = self.master_log.read_text(errors="replace") if self.master_log else ""
        return re.findall(r"Registered app (\S+) with ID (\S+)", text)


class _Daemons:
    """Starts and stops spark-daemon.sh instances, remembering exactly which."""

    def __init__(self, spark_home: Path, env: dict[str, str], pid_dir: Path, log_dir: Path):
        self.script = str(spark_home / "sbin" / "spark-daemon.sh")
        self.env = env
        self.pid_dir = pid_dir
        self.log_dir = log_dir
        self.started: list[tuple[str, int]] = []  # (class, pid), in start order

    def pid_file(self, cls: str) -> Path:
        return self.pid_dir / f"spark-{IDENT}-{cls}-1.pid"

    def log_file(self, cls: str) -> Path | None:
        found = sorted(self.log_dir.glob(f"spark-{IDENT}-{cls}-1-*.out"))
        return found[0] if found else None

    def start(self, cls: str, *args: str) -> int:
        proc = subprocess.run(
            [self.script, "start", cls, "1", *args],
            env=self.env, capture_output=True, text=True, timeout=60,
        )
        pid_file = self.pid_file(cls)
        pid = int(pid_file.read_text().strip()) if pid_file.is_file() else None
        if pid is not None:
            self.started.append((cls, pid))
        if proc.returncode != 0 or pid is None:
            raise RuntimeError(
                f"spark-daemon.sh start {cls} failed (exit {proc.returncode}):\n"
                f"{proc.stdout}{proc.stderr}\n{_tail(self.log_file(cls))}"
            )
        return pid

    def stop_all(self) -> list[str]:
        """Stop what we started, newest first; returns problems (never raises)."""
        problems = []
        for cls, pid in reversed(self.started):
            try:
                if self.pid_file(cls).is_file():
                    subprocess.run(
                        [self.script, "stop", cls, "1"],
                        env=self.env, capture_output=True, text=True, timeout=60,
                    )
                deadline = time.monotonic() + STOP_TIMEOUT
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.2)
                if _alive(pid):
                    problems.append(f"{cls} (pid {pid}) ignored SIGTERM; killed")
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                problems.append(f"stopping {cls} (pid {pid}): {exc!r}")
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.started.clear()
        return problems


def _wait_for(path_fn, pattern: str, pid: int, what: str, deadline: float) -> re.Match:
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        path = path_fn()
        if path is not None and path.is_file():
            match = regex.search(path.read_text(errors="replace"))
            if match:
                return match
        if not _alive(pid):
            raise RuntimeError(f"{what} (pid {pid}) exited during start-up:\n{_tail(path_fn())}")
        time.sleep(0.25)
    raise TimeoutError(f"{what} did not log {pattern!r} within {START_TIMEOUT} s:\n{_tail(path_fn())}")


def _interrupt_on_sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Cluster:
    """A standalone master and one worker (2 cores, 2 GiB) on 127.0.0.1."""
    if _java() is None:
        pytest.skip("no `java` on PATH (nor $JAVA_HOME/bin/java): the cluster tier needs a "
                    "Java 17 runtime, e.g. apt-get install openjdk-17-jre-headless")
    spark_home = _spark_home()
    if not (spark_home / "sbin" / "spark-daemon.sh").is_file():
        pytest.skip(f"{spark_home}/sbin/spark-daemon.sh not found: this pyspark has no sbin/")

    base = tmp_path_factory.mktemp("standalone")
    pid_dir, log_dir, work_dir, conf_dir = (base / d for d in ("pids", "logs", "work", "conf"))
    for d in (pid_dir, log_dir, work_dir, conf_dir):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        SPARK_HOME=str(spark_home),
        SPARK_CONF_DIR=str(conf_dir),  # empty: no stray spark-defaults.conf / spark-env.sh
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_PID_DIR=str(pid_dir),
        SPARK_LOG_DIR=str(log_dir),
        SPARK_WORKER_DIR=str(work_dir),
        SPARK_IDENT_STRING=IDENT,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    master_port, master_ui, worker_ui = free_ports(3)
    daemons = _Daemons(spark_home, env, pid_dir, log_dir)
    # A SIGTERM to pytest (a CI timeout) would kill it without teardown and
    # leave both daemons running: turn it into KeyboardInterrupt meanwhile.
    previous_term = signal.getsignal(signal.SIGTERM)
    if previous_term == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        master_pid = daemons.start(
            MASTER, "--host", "127.0.0.1", "--port", str(master_port),
            "--webui-port", str(master_ui),
        )
        # The master may have moved to another port if ours was taken meanwhile:
        # take the URL it reports.
        url = _wait_for(lambda: daemons.log_file(MASTER),
                        r"Starting Spark master at (spark://\S+)", master_pid, "master",
                        deadline).group(1)
        worker_pid = daemons.start(
            WORKER, "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
            "--webui-port", str(worker_ui), "--work-dir", str(work_dir), url,
        )
        _wait_for(lambda: daemons.log_file(WORKER), r"Successfully registered with master",
                  worker_pid, "worker", deadline)
        yield Cluster(
            master_url=url, spark_home=spark_home, env=env, base=base, log_dir=log_dir,
            work_dir=work_dir, master_log=daemons.log_file(MASTER),
            worker_log=daemons.log_file(WORKER),
            pids={"master": master_pid, "worker": worker_pid},
        )
    finally:
        problems = daemons.stop_all()
        if signal.getsignal(signal.SIGTERM) is _interrupt_on_sigterm:
            signal.signal(signal.SIGTERM, previous_term)
        if problems:
            print("standalone cluster shutdown:", *problems, sep="\n  ", file=sys.stderr)


@pytest.fixture
def spark_submit(standalone_cluster):
    """Run ``spark-submit --master <cluster> <args>`` from the checkout; return
    the CompletedProcess. The whole process group is killed on timeout."""

    def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        cmd = [standalone_cluster.spark_submit, "--master", standalone_cluster.master_url, *args]
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=standalone_cluster.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"spark-submit did not finish within {timeout} s:\n{err[-4000:]}")
        finally:
            # Nothing of this run may outlive it (the driver's Python is a child
            # of the spark-submit JVM, in the same new session).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    return run
