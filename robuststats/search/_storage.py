"""Optuna storages, the study record, and trials left behind by killed workers.

``--storage`` accepts an SQLAlchemy URL (``sqlite:///runs/x/search.db``,
``postgresql://...``, ``mysql+pymysql://...``), ``journal:PATH`` or a path ending in
``.journal``/``.log`` (an append-only journal file, safe for several processes on one file
system), or a path ending in ``.db``/``.sqlite``/``.sqlite3`` (SQLite). The default is
``sqlite:///<runs>/<name>/search.db``.

**No trial lost or duplicated.** Every trial records its worker (host, PID and the PID's
start time) and a heartbeat while it runs. A RUNNING trial whose worker is gone (on this
host: no such process, or another process under that PID; elsewhere: no heartbeat for
``search.stale_after`` seconds), and a trial failed by an interruption (Ctrl-C, SIGTERM),
is marked FAIL and its configuration enqueued again, once: the retry carries
``retry_of`` = the number of the trial it replaces. Only the process whose FAIL transition
succeeds enqueues the retry, so two resuming processes cannot both enqueue it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError

if TYPE_CHECKING:
    import optuna

__all__ = ["ATTR", "default_storage", "open_storage", "recover_stale", "worker_identity"]

#: prefix of the attributes this package keeps on studies and trials
ATTR = "robuststats"
_WORKER = f"{ATTR}:worker"
_HEARTBEAT = f"{ATTR}:heartbeat"
_INTERRUPTED = "interrupted"
RETRY_OF = "retry_of"


def default_storage(runs: str | Path, name: str) -> str:
    return f"sqlite:///{Path(runs) / name / 'search.db'}"


def normalise_url(url: str) -> str:
    """A storage argument as ``sqlite:///...``, ``journal:...`` or another SQLAlchemy URL."""
    text = str(url).strip()
    if not text or "\0" in text:
        raise InputError(f"--storage must be a storage URL or a file path, got {url!r}.")
    if text.startswith("journal:"):
        return text
    if "://" in text:
        return text
    lower = text.lower()
    if lower.endswith((".journal", ".log")):
        return f"journal:{text}"
    if lower.endswith((".db", ".sqlite", ".sqlite3")):
        return f"sqlite:///{text}"
    raise InputError(f"--storage {text!r} is neither a URL (sqlite:///..., postgresql://...) "
                     "nor a file ending in .db/.sqlite/.sqlite3 (SQLite) or .journal/.log "
                     "(journal file).")


def _file_of(url: str) -> Path | None:
    if url.startswith("journal:"):
        return Path(url[len("journal:"):])
    if url.startswith("sqlite:///"):
        rest = url[len("sqlite:///"):]
        return Path(rest.split("?")[0]) if rest and rest != ":memory:" else None
    return None


def check_storage(url: str) -> str:
    """Fail early (one line naming ``--storage``) on a storage that cannot be opened."""
    url = normalise_url(url)
    path = _file_of(url)
    if path is not None:
        from robuststats.runs import check_output_dir

        if path.exists() and not path.is_file():
            raise InputError(f"--storage {url!r}: {str(path)!r} is not a file.")
        try:  # the directory must exist or be creatable, and take a file (a probe is written)
            check_output_dir(path.parent if str(path.parent) else Path("."), "--storage")
        except InputError as exc:
            raise InputError(f"{exc} (storage {url!r})") from None
        return url
    try:
        import sqlalchemy

        sqlalchemy.engine.make_url(url)
    except Exception as exc:  # the URL parser's own message names what is wrong
        raise InputError(f"--storage {url!r} is not a valid database URL: {exc}") from None
    return url


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The Optuna storage of ``url`` (creating a file storage's directory)."""
    import optuna

    url = normalise_url(url)
    path = _file_of(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return JournalStorage(JournalFileBackend(str(path)))
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        # several worker processes write to one file: wait for the lock instead of failing
        kwargs = {"connect_args": {"timeout": 120}}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as exc:
        raise InputError(f"--storage {url!r} cannot be opened: "
                         f"{' '.join(str(exc).split())[:300]}") from None


# ---------------------------------------------------------------------- worker identity
def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (Linux: field 22 of /proc/PID/stat), to tell a
    worker from a later process that reuses its PID."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


def worker_identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_time(pid)}


def _alive(worker: dict[str, Any]) -> bool:
    """Whether the worker recorded in a trial still runs (on this host only)."""
    pid = int(worker.get("pid", -1))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    start = worker.get("start")
    return start is None or _start_time(pid) == start


def stale_reason(trial: optuna.trial.FrozenTrial, *, stale_after: float,
                 now: float | None = None) -> str | None:
    """Why a RUNNING trial is stale, or ``None`` while its worker may still be at work."""
    now = time.time() if now is None else now
    worker = trial.system_attrs.get(_WORKER)
    beat = trial.system_attrs.get(_HEARTBEAT)
    if isinstance(worker, dict) and worker.get("host") == socket.gethostname():
        if not _alive(worker):
            return f"worker process {worker.get('pid')} on this host is gone"
        return None
    last = beat if isinstance(beat, (int, float)) else (
        trial.datetime_start.timestamp() if trial.datetime_start else None)
    if last is not None and now - last > stale_after:
        return f"no heartbeat for {now - last:.0f} s (search.stale_after = {stale_after:g} s)"
    return None


def live_running(study: optuna.Study, *, stale_after: float) -> int:
    import optuna

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    return sum(stale_reason(t, stale_after=stale_after) is None for t in running)


def recover_stale(study: optuna.Study, *, stale_after: float,
                  params: list[str] | None = None) -> list[dict[str, Any]]:
    """Mark stale RUNNING trials FAIL and enqueue interrupted or stale configurations once
    more. Returns one record per trial recovered (number, reason, retry enqueued).

    ``params``: the search space's parameters; a trial stopped before it drew all of them
    had no configuration yet and is not enqueued again (the search draws a new trial).
    """
    import optuna

    TrialState = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get(RETRY_OF) for t in trials}
    storage = study._storage
    done: list[dict[str, Any]] = []
    for t in trials:
        reason = None
        if t.state == TrialState.RUNNING:
            reason = stale_reason(t, stale_after=stale_after)
            if reason is None:
                continue
            try:
                storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except Exception:  # finished meanwhile, or another process failed it first
                continue
        elif t.state == TrialState.FAIL and t.user_attrs.get(_INTERRUPTED):
            if t.number in retried:
                continue  # recovered by an earlier resume
            reason = "interrupted"
        else:
            continue
        if t.number in retried or not t.params or not set(t.params) >= set(params or ()):
            done.append({"trial": t.number, "reason": reason, "retry": False})
            continue
        attrs = {k: v for k, v in t.user_attrs.items()
                 if k in ("baseline",)}
        attrs[RETRY_OF] = t.number
        study.enqueue_trial(dict(t.params), user_attrs=attrs)
        retried.add(t.number)
        done.append({"trial": t.number, "reason": reason, "retry": True})
    return done


@contextmanager
def heartbeat(trial: optuna.Trial, *, stale_after: float) -> Iterator[None]:
    """Record the worker and beat while the trial runs; an interruption marks the trial
    ``interrupted`` (its configuration is enqueued again on resume)."""
    storage, tid = trial.storage, trial._trial_id
    storage.set_trial_system_attr(tid, _WORKER, worker_identity())
    storage.set_trial_system_attr(tid, _HEARTBEAT, time.time())
    stop = threading.Event()
    interval = max(1.0, min(30.0, stale_after / 4))

    def beat() -> None:
        while not stop.wait(interval):
            try:
                storage.set_trial_system_attr(tid, _HEARTBEAT, time.time())
            except Exception:  # the trial finished between the wait and the write
                return

    thread = threading.Thread(target=beat, daemon=True, name="robuststats-heartbeat")
    thread.start()
    try:
        yield
    except KeyboardInterrupt:
        try:
            trial.set_user_attr(_INTERRUPTED, True)
        except Exception:
            pass
        raise
    finally:
        stop.set()
        thread.join(timeout=5)
