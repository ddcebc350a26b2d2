#!/usr/bin/env python3
"""Runs a command against a Spark standalone cluster started on this machine for it.

A master and --workers workers (each --cores cores, --memory of memory) are started from
the PySpark installation of this Python (its bin/spark-class, as a cluster's machines
start them), bound to 127.0.0.1 on free ports; once every worker has registered, the
command runs with {master} in its arguments replaced by the master's URL
(spark://127.0.0.1:PORT) and SPARK_MASTER set to it; then the workers and the master are
stopped, also when the command fails or this script is interrupted, and nothing is left
running. Used by bench/fleet-scale.sh and crates/coldstart/tests/fleet_cluster.rs:

    python3 fleet/spark_cluster.py --workers 2 -- \\
        python3 fleet/run_query.py --engine spark --master {master} \\
            --conf spark.driver.host=127.0.0.1 --dataset fleet/ --query fleet/queries/ready.sql

Exit status: the command's; 2 on a bad argument, 3 when PySpark or Java is missing, 4 when
the cluster did not come up (its logs are printed).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

START_TIMEOUT_S = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home():
    try:
        import pyspark
    except ImportError:
        print("spark_cluster: the PySpark package is not installed for " + sys.executable + ": pip install pyspark", file=sys.stderr)
        sys.exit(3)
    return os.path.dirname(pyspark.__file__)


class Cluster:
    """A master and its workers, each a process group of its own."""

    def __init__(self, workers, cores, memory):
        self.home = spark_home()
        if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
            print("spark_cluster: Java is not installed (Spark needs Java 17)", file=sys.stderr)
            sys.exit(3)
        self.work = tempfile.mkdtemp(prefix="coldstart-spark-")
        self.port, self.ui_port = free_port(), free_port()
        self.url = "spark://127.0.0.1:%d" % self.port
        self.processes = []
        self.env = dict(
            os.environ,
            SPARK_HOME=self.home,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=os.path.join(self.work, "local"),
            SPARK_LOG_DIR=os.path.join(self.work, "logs"),
            SPARK_NO_DAEMONIZE="1",
            # Names the cluster's folder on the master's and workers' command lines, so that
            # `pgrep -f` finds them (and nothing else) after a run.
            SPARK_DAEMON_JAVA_OPTS="-Dcoldstart.spark.cluster=" + self.work,
        )
        self.start("master", "org.apache.spark.deploy.master.Master",
                   ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)])
        for i in range(workers):
            work_dir = os.path.join(self.work, "worker-%d" % i)
            self.start("worker-%d" % i, "org.apache.spark.deploy.worker.Worker",
                       [self.url, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                        "--webui-port", str(free_port()), "--work-dir", work_dir])
        self.workers = workers

    def start(self, name, main_class, args):
        log = open(os.path.join(self.work, name + ".log"), "wb")
        command = [os.path.join(self.home, "bin", "spark-class"), main_class] + args
        self.processes.append((name, subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL, start_new_session=True)))

    def alive_workers(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/" % self.ui_port, timeout=2) as r:
                state = json.load(r)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_until_up(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.alive_workers() == self.workers:
                return True
            if any(p.poll() is not None for _, p in self.processes):
                break
            time.sleep(0.5)
        return False

    def print_logs(self):
        for name, _ in self.processes:
            with open(os.path.join(self.work, name + ".log"), errors="replace") as f:
                lines = f.read().splitlines()[-20:]
            print("spark_cluster: %s's last lines:\n  %s" % (name, "\n  ".join(lines)), file=sys.stderr)

    def stop(self):
        """Workers first, then the master: SIGTERM to each process group, SIGKILL after 20 s."""
        for _, p in reversed(self.processes):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for _, p in reversed(self.processes):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores of each worker")
    parser.add_argument("--memory", default="2g", help="memory of each worker, e.g. 2g")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS… ({master} is replaced)")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.workers < 1 or args.cores < 1:
        print("spark_cluster: give --workers and --cores of at least 1 and a command after --", file=sys.stderr)
        sys.exit(2)
    # A SIGTERM (a test's timeout, kill) stops the cluster like an exception would.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = Cluster(args.workers, args.cores, args.memory)
    try:
        if not cluster.wait_until_up():
            cluster.print_logs()
            print("spark_cluster: the cluster did not come up within %d s" % START_TIMEOUT_S, file=sys.stderr)
            sys.exit(4)
        print("spark_cluster: %s with %d workers" % (cluster.url, args.workers), file=sys.stderr)
        command = [a.replace("{master}", cluster.url) for a in command]
        status = subprocess.call(command, env=dict(os.environ, SPARK_MASTER=cluster.url))
    finally:
        cluster.stop()
    sys.exit(status)


if __name__ == "__main__":
    main()
