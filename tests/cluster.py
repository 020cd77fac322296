"""Local tf.distribute clusters for tests: processes on 127.0.0.1, bounded in time.

`LocalCluster` picks free ports on 127.0.0.1, gives each task its `TF_CONFIG`, and
starts each task as a subprocess of `tests/distributed_worker.py` (or another
script). Each task's output goes to its own log file (a pipe could fill and block
the task). Every wait takes a timeout and fails with the logs' tails in the message,
and `stop()` (run by the context manager, also on failure) ends every process it
started: SIGTERM to the process group, then SIGKILL after a grace period.

Example:

    with LocalCluster({"worker": 2}, tmp_path) as cluster:
        for i in range(2):
            cluster.start("worker", i, ["mwms_ctr", "--out", str(tmp_path)])
        cluster.wait_all(timeout=60)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: The worker script the tests start.
WORKER_SCRIPT = Path(__file__).resolve().parent / "distributed_worker.py"
_REPO = Path(__file__).resolve().parents[1]


class ClusterError(AssertionError):
    """A task exited badly, or did not finish in time (the message holds its log)."""


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports free on 127.0.0.1 now.

    All sockets are held open until every port is picked, so no port is returned
    twice; another process may still take one before the task binds it (rare, and
    the task then fails with a clear "address in use" in its log).
    """
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_spec(sizes: dict[str, int]) -> dict[str, list[str]]:
    """`{"worker": ["127.0.0.1:port", ...], ...}` with free ports for each task."""
    ports = iter(free_ports(sum(sizes.values())))
    return {
        job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in sizes.items()
    }


def tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    """The `TF_CONFIG` JSON of one task of `cluster`."""
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


class Task:
    """One started process: its name, `Popen` and log file."""

    def __init__(self, name: str, process: subprocess.Popen, log: Path):
        self.name = name
        self.process = process
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 25) -> str:
        # TensorFlow's C++ start-up lines say nothing about a failure: drop them.
        kept = [
            line
            for line in self.output().splitlines()
            if not line.startswith(("I0000", "W0000", "E0000"))
        ]
        return "\n".join(kept[-lines:])


class LocalCluster:
    """A tf.distribute cluster of local processes (see the module docstring).

    Args:
        sizes: tasks per job, e.g. `{"worker": 2}` or
            `{"chief": 1, "worker": 2, "ps": 2}`.
        workdir: folder for the logs.
        script: the Python script each task runs. Defaults to
            `tests/distributed_worker.py`.
        env: extra environment variables for every task.
    """

    def __init__(self, sizes, workdir, script=WORKER_SCRIPT, env=None):
        self.spec = cluster_spec(sizes)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.script = Path(script)
        self.env = dict(env or {})
        self.tasks: dict[str, Task] = {}
        self._starts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self, task_type: str, index: int, args=()) -> Task:
        """Starts task `task_type:index` running `script *args` with its TF_CONFIG.

        A task started again (after a kill) keeps its address and gets a new log.
        """
        name = f"{task_type}:{index}"
        old = self.tasks.get(name)
        if old is not None and old.process.poll() is None:
            raise ClusterError(f"task {name} is still running")
        self._starts += 1
        log = self.workdir / f"{task_type}{index}_{self._starts}.log"
        env = {
            **os.environ,
            "TF_CONFIG": tf_config(self.spec, task_type, index),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONPATH": os.pathsep.join(
                [str(_REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, str(self.script), *map(str, args)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(self.workdir),
                # Its own process group: stop() ends whatever it starts too.
                start_new_session=True,
            )
        task = Task(name, process, log)
        self.tasks[name] = task
        return task

    def logs(self, names=None) -> str:
        names = names or list(self.tasks)
        return "\n".join(
            f"----- {n} (exit {self.tasks[n].process.poll()}) -----\n"
            f"{self.tasks[n].tail()}"
            for n in names
        )

    def wait(self, name: str, timeout: float, expect_ok: bool = True) -> int:
        """Waits up to `timeout` s for task `name` to exit; returns its exit code.

        Raises `ClusterError` (with the logs) when it is still running then, or,
        with `expect_ok`, when it exits with a non-zero code.
        """
        task = self.tasks[name]
        try:
            code = task.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(
                f"task {name} still running after {timeout:.0f} s\n{self.logs()}"
            ) from None
        if expect_ok and code != 0:
            raise ClusterError(f"task {name} exited with {code}\n{self.logs()}")
        return code

    def wait_all(self, timeout: float, names=None) -> None:
        """Waits for the tasks `names` (default: all) to exit with 0, `timeout` s in
        all; the first failure stops waiting for the others."""
        deadline = time.monotonic() + timeout
        pending = list(names or self.tasks)
        while pending:
            for name in list(pending):
                code = self.tasks[name].process.poll()
                if code is None:
                    continue
                pending.remove(name)
                if code != 0:
                    raise ClusterError(f"task {name} exited with {code}\n{self.logs()}")
            if pending and time.monotonic() > deadline:
                raise ClusterError(
                    f"tasks {pending} still running after {timeout:.0f} s\n"
                    f"{self.logs()}"
                )
            time.sleep(0.1)

    def wait_for_file(self, path: Path, timeout: float, watch=None) -> None:
        """Waits up to `timeout` s for `path` to exist; fails early when a task of
        `watch` (default: all) exits first."""
        deadline = time.monotonic() + timeout
        watch = watch or list(self.tasks)
        while not Path(path).exists():
            dead = [n for n in watch if self.tasks[n].process.poll() is not None]
            if dead:
                raise ClusterError(
                    f"tasks {dead} exited before {Path(path).name} appeared\n"
                    f"{self.logs()}"
                )
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{Path(path).name} did not appear within {timeout:.0f} s\n"
                    f"{self.logs()}"
                )
            time.sleep(0.1)

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 10) -> None:
        """Sends `sig` to task `name`'s process group and waits for it to exit."""
        task = self.tasks[name]
        _signal_group(task.process, sig)
        try:
            task.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(task.process, signal.SIGKILL)
            task.process.wait(timeout=timeout)

    def stop(self, grace: float = 5) -> None:
        """Ends every task still running: SIGTERM, then SIGKILL after `grace` s."""
        running = [t for t in self.tasks.values() if t.process.poll() is None]
        for task in running:
            _signal_group(task.process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for task in running:
            try:
                task.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(task.process, signal.SIGKILL)
                task.process.wait(timeout=grace)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    if process.poll() is not None:
        return  # exited and reaped: its pid may belong to another process now
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass  # already gone
