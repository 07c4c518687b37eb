"""Where the runs of a grid or a sweep are simulated: ``BACKENDS`` by name.

A backend's ``map(fn, tasks)`` yields ``(task, value, error)`` for each task as soon as it is
done, in any order (the callers put results back in grid order; a run's result never depends
on where or when it ran). ``error`` is None, or says why the backend lost the task (a Ray task
whose worker died more often than it is retried); ``fn`` reports its own errors in ``value``.

- ``local``: worker processes on this machine (``--jobs``): forked on Linux when this process
  runs no other thread, so they start with what it has read (the traces), else spawned
  (``start_method``).
- ``ray``: Ray tasks on the cluster at ``address`` (``ray://HOST:10001`` or ``HOST:6379``), or on
  a local cluster of ``jobs`` CPUs started for the call and stopped after it. Needs the ``ray``
  extra (``pip install -e '.[ray]'``; a ``ray://`` address needs ``ray[client]``); every node
  of a cluster needs the project installed.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from common.errors import SaddleError

# A Ray task is run again this many times when its worker process dies (killed, out of memory).
RAY_RETRIES = 3


def make(name: str, jobs: int, address: str | None = None) -> Backend:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise SaddleError(f"jobs must be a positive integer, found {jobs!r}")
    if name not in BACKENDS:
        raise SaddleError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    if address is not None and name != "ray":
        raise SaddleError(f"--address names a Ray cluster: give --backend ray too (not {name})")
    return BACKENDS[name](jobs, address)


@dataclass
class Backend:
    jobs: int
    address: str | None = None

    def map(self, fn: Callable, tasks: list) -> Iterator[tuple[object, object, str | None]]:
        raise NotImplementedError


class LocalBackend(Backend):
    def map(self, fn, tasks):
        if self.jobs == 1 or len(tasks) < 2:        # no pool for one worker's worth of work
            for task in tasks:
                yield task, fn(task), None
            return
        import multiprocessing
        import threading
        ctx = multiprocessing.get_context(start_method())
        # Workers start with Ctrl-C ignored (inherited through fork or exec), so one that is
        # still starting cannot print a KeyboardInterrupt of its own; the parent alone reports it.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        try:
            pool = ctx.Pool(min(self.jobs, len(tasks)), initializer=_worker_init)
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
        with pool:
            # imap_unordered keeps the task order: pair each value with its task by position.
            for i, value in pool.imap_unordered(partial(_indexed, fn), enumerate(tasks)):
                yield tasks[i], value, None


def _indexed(fn: Callable, item: tuple) -> tuple:
    """``(i, fn(task))`` of ``item = (i, task)`` (picklable, unlike a closure)."""
    return item[0], fn(item[1])


def start_method() -> str:
    """How the local backend starts its workers: ``fork`` on Linux, so a worker starts with the
    parent's caches (the traces the grid's check read) and without importing the project
    again; ``spawn`` elsewhere (forking is unsafe on macOS), whenever this process runs another
    Python thread (a fork copies the locks it may hold) and once Ray is imported (a forked
    worker inherits its SIGTERM handler, which hangs when the pool stops the worker)."""
    import sys
    import threading
    alone = threading.active_count() == 1 and "ray" not in sys.modules
    return "fork" if sys.platform == "linux" and alone else "spawn"


def _worker_init() -> None:
    # Ctrl-C and a hangup go to the whole process group: the parent alone stops the pool, by
    # SIGTERM (a forked worker would have inherited the parent's handler of it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class RayBackend(Backend):
    def map(self, fn, tasks):
        if not tasks:
            return
        try:
            import ray
        except ImportError:
            raise SaddleError("the ray backend needs Ray: pip install -e '.[ray]' "
                              "(make test installs it)") from None
        # Ray reports usage statistics over the network unless told not to.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        started = not ray.is_initialized()
        if started:
            options = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                           configure_logging=True)
            if self.address is None:        # a local cluster of our own, stopped at the end
                options["num_cpus"] = self.jobs
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise SaddleError(f"--address {self.address}: cannot join the Ray cluster "
                                  f"({exc})") from None
        remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(fn)
        refs = {remote.remote(task): task for task in tasks}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                task = refs.pop(ready[0])
                try:
                    yield task, ray.get(ready[0]), None
                except ray.exceptions.RayError as exc:   # its workers died RAY_RETRIES + 1 times
                    yield task, None, f"lost by Ray after {RAY_RETRIES} retries: {exc}"
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


BACKENDS: dict[str, type[Backend]] = {"local": LocalBackend, "ray": RayBackend}
