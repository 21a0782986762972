"""Worker processes of every command: start-up, thread policy, a pool, and stopping them.

One policy for all five commands:

- workers are spawned (no fork of a process holding torch threads) from
  :func:`spawn_context`, which on Linux makes each one die with its parent from the first
  line it runs, before its interpreter imports the parent's main module or torch (seconds
  on a busy machine); each then starts with :func:`worker_init`: the same promise
  everywhere (a watchdog thread), and Ctrl-C left to the parent;
- torch runs one thread per process (:func:`one_torch_thread`): the processes are the
  parallelism, and the engine's noise draws need it under inference mode (below);
- an interruption stops the workers at once (:func:`stop_processes`: SIGTERM, a grace
  period, SIGKILL), keeping what they wrote to disk.

:func:`run_pool` runs calls in a spawn-context pool under that policy; the study's executor
and the probe use it, and the search runs its own long-lived processes with the same
start-up and stop.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import context as mp_context
from multiprocessing import popen_spawn_posix
from multiprocessing import spawn as mp_spawn
from multiprocessing import util as mp_util
from multiprocessing.context import reduction, set_spawning_popen
from typing import Any

from robuststats._quiet import quiet_dependencies

__all__ = ["PARENT_POLL_SECONDS", "TERMINATE_GRACE", "one_torch_thread", "run_pool",
           "spawn_context", "stop_pool", "stop_processes", "worker_init"]

#: seconds between a worker's checks that its parent is alive (the watchdog of a worker
#: on a platform without PR_SET_PDEATHSIG, and the backstop on Linux)
PARENT_POLL_SECONDS = 0.25
#: seconds the workers get to exit after SIGTERM when a run is interrupted, before SIGKILL
TERMINATE_GRACE = 1.0
#: seconds between the parent's looks at a pool's futures and at the files on disk
_POLL_SECONDS = 0.5


#: the first lines a spawned worker runs (Linux): the kernel kills it when its parent dies
#: (``PR_SET_PDEATHSIG`` survives the imports and any later exec), a parent that died
#: before that took effect is seen as a new parent pid, and Ctrl-C is the parent's
_PROLOGUE = ("import os, signal, ctypes\n"
             "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             "try:\n"
             "    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
             "except Exception:\n"
             "    pass\n"
             "if os.getppid() != {parent}:\n"
             "    os._exit(1)\n")


def spawn_context() -> mp_context.BaseContext:
    """The multiprocessing context of every worker: spawn; on Linux, children that die with
    their parent at any moment, their start-up included.

    A spawned child imports its parent's main module and unpickles its work before
    :func:`worker_init` can run: seconds (torch) on a busy machine, during which a killed
    parent used to leave it, and the resource tracker it holds open, running for as long.
    Here the child's command line starts with :data:`_PROLOGUE`, so ``PR_SET_PDEATHSIG``
    takes effect in the first line of Python it runs. Elsewhere the plain spawn context
    (the watchdog of :func:`worker_init` remains).
    """
    if not sys.platform.startswith("linux"):
        return multiprocessing.get_context("spawn")
    return _DyingContext()


class _DyingPopen(popen_spawn_posix.Popen):
    """A spawn ``Popen`` whose child runs :data:`_PROLOGUE` first."""

    # CPython's popen_spawn_posix.Popen._launch (the same in 3.10 to 3.13) with one change:
    # the command line begins with the prologue
    def _launch(self, process_obj: Any) -> None:
        from multiprocessing import resource_tracker

        tracker_fd = resource_tracker.getfd()
        self._fds.append(tracker_fd)
        prep_data = mp_spawn.get_preparation_data(process_obj._name)
        fp = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, fp)
            reduction.dump(process_obj, fp)
        finally:
            set_spawning_popen(None)
        parent_r = child_w = child_r = parent_w = None
        try:
            parent_r, child_w = os.pipe()
            child_r, parent_w = os.pipe()
            cmd = _with_prologue(mp_spawn.get_command_line(tracker_fd=tracker_fd,
                                                           pipe_handle=child_r))
            self._fds.extend([child_r, child_w])
            self.pid = mp_util.spawnv_passfds(mp_spawn.get_executable(), cmd, self._fds)
            self.sentinel = parent_r
            with open(parent_w, "wb", closefd=False) as f:
                f.write(fp.getbuffer())
        finally:
            self.finalizer = mp_util.Finalize(
                self, mp_util.close_fds, [fd for fd in (parent_r, parent_w) if fd is not None])
            for fd in (child_r, child_w):
                if fd is not None:
                    os.close(fd)


class _DyingProcess(mp_context.SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _DyingPopen(process_obj)


class _DyingContext(mp_context.SpawnContext):
    Process = _DyingProcess  # type: ignore[assignment]


def _with_prologue(cmd: list[str]) -> list[str]:
    """``[python, *flags, "-c", prog, "--multiprocessing-fork"]`` with the prologue before
    ``prog`` (a frozen executable's command line, without ``-c``, is left as it is)."""
    if "-c" not in cmd:
        return cmd
    at = cmd.index("-c") + 1
    return [*cmd[:at], _PROLOGUE.format(parent=os.getpid()) + cmd[at], *cmd[at + 1:]]


def worker_init(parent_pid: int) -> None:
    """Runs first in every worker: make it die with its parent, and leave Ctrl-C to it.

    A worker holds a model (hundreds of MB) and would otherwise run on for minutes as an
    orphan after its parent is killed (SIGKILL cannot be handled by the parent). On Linux,
    ``PR_SET_PDEATHSIG`` has the kernel send SIGKILL when the parent dies; everywhere, a
    daemon thread checks ``os.getppid()`` every :data:`PARENT_POLL_SECONDS` and exits.
    SIGINT is ignored: Ctrl-C reaches the whole process group, and the parent decides
    (it stops the pool at once, see :func:`stop_pool`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _kill_me_with_parent()
    quiet_dependencies()  # as in the parent command: no start-up chatter per worker
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the line above could take effect
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True,
                     name="robuststats-parent-watch").start()


def _kill_me_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here: the watchdog thread remains
        pass


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned: the cell in flight is lost, finished cells are on disk


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with one torch thread, restoring the caller's count afterwards.

    The pool is the parallelism: threads on top would oversubscribe the cores. And the
    engine draws relative Gaussian noise on a thread pool of ``torch.get_num_threads()``
    threads; under ``torch.inference_mode`` (the evaluator's decoding) its pool threads are
    outside inference mode and cannot update the output in place, so evaluation with more
    than one thread fails on outputs larger than one chunk (2**17 elements).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def stop_processes(processes: Sequence[Any], grace: float = TERMINATE_GRACE) -> None:
    """End ``processes`` now: SIGTERM, up to ``grace`` seconds in all to exit, then SIGKILL."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(1.0)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (:func:`stop_processes`)."""
    # the executor has no public way to end running work; its process table is the only
    # handle on the workers (a dict pid -> Process since Python 3.7)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    stop_processes(processes)


def run_pool(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], workers: int, *,
             on_result: Callable[[int, Any], None],
             on_error: Callable[[int, BaseException], None],
             poll: Callable[[], None] | None = None) -> None:
    """Run ``fn(*calls[i])`` for every ``i`` in ``workers`` spawned processes.

    Each finished call is handed to ``on_result(i, value)``, or to ``on_error(i, exc)``
    inside the ``except`` block (so ``traceback.format_exc()`` there gives the worker's
    traceback). ``poll()`` runs every half second (progress read from disk). Any
    interruption (Ctrl-C, SIGTERM turned into one, an exception of a callback) cancels
    pending calls and ends the workers at once: what they wrote is kept, the calls in
    flight are lost.

    A worker that dies (the OOM killer, a crash in native code) breaks the pool and every
    call not finished with it. Those calls run again in a new pool; the ones that were in
    flight run first, each alone, so the call whose worker dies alone is the one handed to
    ``on_error`` (with ``BrokenProcessPool``) and every other call still runs. ``fn`` must
    therefore tolerate a second run of a call (the study's jobs skip the cells already
    written).
    """
    todo = list(range(len(calls)))
    while todo:
        suspects, rest = _pool_round(fn, calls, todo, workers, on_result, on_error, poll)
        for i in suspects:  # alone: a death now is this call's own
            _pool_round(fn, calls, [i], 1, on_result, on_error, poll, alone=True)
        todo = rest


def _pool_round(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], indices: list[int],
                workers: int, on_result: Callable[[int, Any], None],
                on_error: Callable[[int, BaseException], None],
                poll: Callable[[], None] | None, *, alone: bool = False
                ) -> tuple[list[int], list[int]]:
    """Run ``calls[i]`` for ``i`` in ``indices`` in a new pool; returns the calls a dead
    worker broke: those seen in flight (all of them when none was), and the others.
    ``alone``: a call broken by its worker's death goes to ``on_error``."""
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=spawn_context(),
                               initializer=worker_init, initargs=(os.getpid(),))
    broken: list[int] = []
    started: set[int] = set()
    try:
        futures: dict[Future[Any], int] = {pool.submit(fn, *calls[i]): i for i in indices}
        pending = set(futures)
        while pending:
            started |= {futures[f] for f in pending if f.running()}
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=futures.__getitem__):
                try:
                    value = fut.result()
                except BrokenProcessPool as exc:
                    if alone:
                        on_error(futures[fut], exc)
                    else:
                        broken.append(futures[fut])
                except Exception as exc:
                    on_error(futures[fut], exc)
                else:
                    on_result(futures[fut], value)
            if poll is not None:
                poll()
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    suspects = [i for i in broken if i in started] or broken
    return suspects, [i for i in broken if i not in suspects]
