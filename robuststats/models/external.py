"""The ``command`` trainer: a user's training command run once per condition × seed.

```yaml
trainer:
  name: command
  params:
    argv: [python, train.py, --out, "{output}", --seed, "{seed}"]
    output: "ckpt/{condition}/seed{seed}"        # default {run_dir}/checkpoints/{condition}__s{seed}
    env: {WANDB_MODE: offline}
    timeout: 86400                               # seconds, or null (default)
```

The command is an argv list, run without a shell; each argument has its placeholders
(``{condition}``, ``{seed}``, ``{output}``, ``{run_dir}``, with format specs such as
``{seed:03d}``) substituted on its own, so a value never becomes more arguments. The
condition reaches the command, and every process it starts, through the environment:

- ``ROBUSTSTATS_NOISE``: the condition's ``train_noise`` as JSON (unset for a clean
  condition), for :func:`robuststats.engine.apply_from_env` in each worker;
- ``ROBUSTSTATS_AQN``: the AQN schedule as JSON (unset without one), read back by
  :func:`aqn_from_env`;
- ``ROBUSTSTATS_INJECTION_LOG``: where the engine appends each process's injection counts;
- ``ROBUSTSTATS_CONDITION``, ``ROBUSTSTATS_SEED``, ``ROBUSTSTATS_OUTPUT``, ``ROBUSTSTATS_RUN_DIR``.

Stdout and stderr go to ``<run dir>/logs/<condition>__s<seed>.log``. A command that fails
(non-zero exit, timeout, no checkpoint) fails the job's cells with the log's last lines. A
noisy condition's checkpoint is accepted only when every process that reported counts
injected every op it had to, in every phase with a positive scale that ran in it, and when
each such phase ran in some process (:func:`check_injection_log`). Then a completion marker
(``.robuststats-complete.json``, listing the checkpoint's files and sizes) is written in
the output directory; a later run with the same settings finds it and does not run the
command again. A directory without the marker is never taken for a checkpoint.

Longer than 400 lines on purpose: the command trainer's whole contract with an outside
process (templates, environment, timeout, kill of its process group, marker, injection
log) is one protocol, read and tested as one.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from robuststats._atomic import atomic_write_bytes
from robuststats.engine import ENV_VAR, INJECTION_LOG_VAR, AQNSchedule, NoiseSpec
from robuststats.errors import InputError, RobuststatsError
from robuststats.models.trainer import TRAINERS, TrainedModel, Trainer, TrainingCondition

if TYPE_CHECKING:
    from robuststats.models.tasks import Task

__all__ = ["AQN_ENV_VAR", "MARKER", "CommandTrainer", "ExternalCheckpoint",
           "ExternalTrainingError", "aqn_from_env", "check_injection_log"]

AQN_ENV_VAR = "ROBUSTSTATS_AQN"
#: the completion marker the runner writes into an accepted checkpoint directory
MARKER = ".robuststats-complete.json"
_POINTER = "external_checkpoint.json"
_ARGV_FIELDS = ("condition", "seed", "output", "run_dir")
_OUTPUT_FIELDS = ("condition", "seed", "run_dir")
_RESERVED = (ENV_VAR, AQN_ENV_VAR, INJECTION_LOG_VAR, "ROBUSTSTATS_CONDITION",
             "ROBUSTSTATS_SEED", "ROBUSTSTATS_OUTPUT", "ROBUSTSTATS_RUN_DIR")
#: lines of the command's log quoted in a failure
TAIL_LINES = 20
MAX_ARGS = 10_000


class ExternalTrainingError(RobuststatsError, RuntimeError):
    """The command failed, or its checkpoint was refused (the message says why)."""


def aqn_from_env(environ: Mapping[str, str] | None = None) -> AQNSchedule | None:
    """The AQN schedule the study passed in ``ROBUSTSTATS_AQN`` (``None`` when unset).

    ``total_steps`` may be ``None``: set it to the command's own step count with
    ``dataclasses.replace(schedule, total_steps=n)``.
    """
    env = os.environ if environ is None else environ
    raw = env.get(AQN_ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"`{AQN_ENV_VAR}` holds invalid JSON ({exc.msg} at char {exc.pos}).") \
            from None
    try:
        return AQNSchedule.from_dict(data)
    except InputError as exc:
        raise InputError(f"`{AQN_ENV_VAR}`: {exc}") from None


# ------------------------------------------------------------------ templates

def _fields(key: str, template: str, allowed: tuple[str, ...]) -> set[str]:
    """The placeholders of ``template``; unknown ones and bad braces are errors naming ``key``."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InputError(f"`{key}` {template!r} is not a valid template: {exc}.") from None
    names = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in allowed or conversion or "{" in (spec or ""):
            raise InputError(f"`{key}` {template!r} uses unknown placeholder {{{name}}}; known: "
                             + ", ".join(f"{{{f}}}" for f in allowed) + ".")
        names.add(name)
    return names


def _fill(key: str, template: str, values: Mapping[str, Any]) -> str:
    try:
        return template.format(**values)
    except (ValueError, KeyError, IndexError) as exc:
        raise InputError(f"`{key}` {template!r} cannot be filled: {exc}.") from None


def _argv(key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > MAX_ARGS \
            or not all(isinstance(a, str) for a in value):
        raise InputError(f"`{key}` must be a non-empty list of strings (the command and its "
                         f"arguments, no shell), got {value!r}.")
    if not value[0].strip():
        raise InputError(f"`{key}` must start with the program to run, got {value[0]!r}.")
    for i, arg in enumerate(value):
        if "\0" in arg:
            raise InputError(f"`{key}` argument {i} contains a NUL byte.")
        _fields(key, arg, _ARGV_FIELDS)
    return list(value)


def _output(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise InputError(f"`{key}` must be a non-empty path template, got {value!r}.")
    used = _fields(key, value, _OUTPUT_FIELDS)
    if not {"condition", "seed"} <= used:
        raise InputError(f"`{key}` {value!r} must contain {{condition}} and {{seed}}: every "
                         "condition × seed needs its own checkpoint directory.")
    return value


def _env(key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"`{key}` must be a mapping of variable names to strings, got "
                         f"{value!r}.")
    out = {}
    for name, text in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise InputError(f"`{key}` has an invalid variable name {name!r}.")
        if name in _RESERVED:
            raise InputError(f"`{key}` may not set {name}: the study sets it per condition.")
        if not isinstance(text, str) or "\0" in text:
            raise InputError(f"`{key}` value of {name} must be a string, got {text!r}.")
        _fields(key, text, _ARGV_FIELDS)
        out[name] = text
    return out


def _timeout(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or value != value or value == float("inf"):
        raise InputError(f"`{key}` must be a positive number of seconds or null, got {value!r}.")
    return float(value)


# ------------------------------------------------------------------ injection proof

def check_injection_log(path: Path, noise: NoiseSpec) -> dict[str, Any]:
    """Check the counts the command's processes appended to ``path``; returns a summary.

    Every record (one per process and model session) must have run with the condition's
    phase scales, run the model, and injected each of its required ops in every phase
    that has a positive scale and ran in that process; each phase with a positive scale
    must have run in at least one process. Raises :class:`ExternalTrainingError` listing
    every problem otherwise.
    """
    records = []
    if path.is_file():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise ExternalTrainingError(f"injection log {str(path)!r} line {n} is not "
                                            "JSON.") from None
    if not records:
        raise ExternalTrainingError(
            f"no process reported injection counts (to {INJECTION_LOG_VAR}={str(path)!r}): the "
            "command must open the noise from the environment in every process that runs "
            "the model (robuststats.engine.apply_from_env(model) ... stop_from_env(model)).")
    wanted = {p: s for p, s in noise.phase_scales.items() if s > 0}
    problems: list[str] = []
    ran_somewhere: set[str] = set()
    for rec in records:
        who = f"process {rec.get('pid')} on {rec.get('host')}"
        scales = {p: float(s) for p, s in (rec.get("phase_scales") or {}).items() if s > 0}
        if scales != wanted:
            problems.append(f"{who} ran with phase scales {scales}, not the condition's "
                            f"{wanted}")
            continue
        ran = {"forward": rec.get("forward_calls", 0) > 0,
               "backward": bool(rec.get("backward_ran"))}
        if not any(ran[p] for p in wanted):
            problems.append(f"{who} opened a noise session but never ran the model")
            continue
        counts: dict[tuple[str, str], int] = {}
        for row in rec.get("counts", []):
            k = (row["op"], row["phase"])
            counts[k] = counts.get(k, 0) + int(row["count"])
        for phase in wanted:
            if not ran[phase]:
                continue
            ran_somewhere.add(phase)
            for op in rec.get("required_ops", []):
                if counts.get((op, phase), 0) == 0:
                    problems.append(f"{who}: op {op!r} got no injections in {phase}")
    for phase in sorted(set(wanted) - ran_somewhere):
        problems.append(f"no process ran the {phase} phase (scale {wanted[phase]})")
    if problems:
        raise ExternalTrainingError("injection check failed: " + "; ".join(problems) + ".")
    totals: dict[str, int] = {}
    for rec in records:
        for row in rec.get("counts", []):
            key = f"{row['op']}/{row['phase']}"
            totals[key] = totals.get(key, 0) + int(row["count"])
    return {"processes": len(records),
            "pids": sorted({(r.get("host"), r.get("pid")) for r in records}),
            "counts": dict(sorted(totals.items()))}


# ------------------------------------------------------------------ checkpoint

class ExternalCheckpoint(TrainedModel):
    """A model loaded from the command's checkpoint; ``save`` records where it is.

    The run directory's model cache then holds a small pointer instead of a second copy
    of a checkpoint that may be many gigabytes.
    """

    checkpoint: Path

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        if target.exists() and any(target.iterdir()):
            raise InputError(f"`path` must be a new or empty directory, got {str(target)!r}.")
        target.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target / _POINTER, json.dumps(
            {"checkpoint": str(self.checkpoint), "info": self.info,
             "sha256": _marked_sha256(self.checkpoint)}, indent=2, default=str).encode())
        return target


def _listing(output: Path) -> dict[str, int]:
    return {str(p.relative_to(output)): p.stat().st_size
            for p in sorted(output.rglob("*")) if p.is_file() and p.name != MARKER}


def marker_problem(output: Path, fingerprint: str | None = None) -> str | None:
    """Why ``output`` is not a complete checkpoint (``None`` when it is)."""
    marker = output / MARKER
    if not marker.is_file():
        return f"{str(output)!r} has no completion marker {MARKER}"
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
        files = dict(data["files"])
    except (ValueError, KeyError, TypeError):
        return f"its completion marker {str(marker)!r} is unreadable"
    if fingerprint is not None and data.get("fingerprint") != fingerprint:
        return (f"{str(output)!r} holds a checkpoint made with other settings (command, "
                "environment or noise)")
    now = _listing(output)
    changed = sorted(f for f, size in files.items() if now.get(f) != size)
    if changed:
        return f"{str(output)!r} changed since it was completed ({changed[0]} differs)"
    if isinstance(data.get("identity"), dict):  # files rewritten at the same size
        from robuststats.models.identity import identity_difference

        problem = identity_difference(data["identity"], _identity(output) or {"sha256": None,
                                                                             "files": {}},
                                      what="the completed one")
        if problem is not None:
            return f"{str(output)!r} changed since it was completed ({problem})"
    return None


def _marked_sha256(output: Path) -> str | None:
    """The checkpoint identity's SHA-256 its completion marker recorded (computed when the
    marker has none): what the checked marker vouches for, without hashing twice."""
    try:
        identity = json.loads((output / MARKER).read_text(encoding="utf-8"))["identity"]
        return str(identity["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        found = _identity(output)
        return None if found is None else str(found["sha256"])


def _identity(output: Path) -> dict[str, Any] | None:
    """The checkpoint identity of the command's output (None without weight files)."""
    from robuststats.models.identity import checkpoint_identity
    from robuststats.models.weights import weight_file

    return checkpoint_identity(output, key="output") if weight_file(output) else None


def _load_checkpoint(output: Path, info: dict[str, Any]) -> ExternalCheckpoint:
    base = TrainedModel.load(output)
    model = ExternalCheckpoint(model=base.model, tokenizer=base.tokenizer,
                               info={**base.info, **info})
    model.checkpoint = output
    return model


@TRAINERS.register("command")
class CommandTrainer(Trainer):
    """Run a user's training command per condition × seed (module docstring)."""

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "argv": (_argv, None),
        "output": (_output, "{run_dir}/checkpoints/{condition}__s{seed}"),
        "env": (_env, {}),
        "timeout": (_timeout, None),
        "model": (lambda key, value: value, None),  # sizes are the command's own
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["argv"] is None:
            raise InputError("trainer 'command' needs `argv` (the command, a list of strings).")
        self.run_dir: Path | None = None

    def bind_run(self, run_dir: str | Path) -> None:
        """The run directory (logs, ``{run_dir}``); the executor calls this before train."""
        self.run_dir = Path(run_dir).resolve()

    def load(self, path: str | Path) -> TrainedModel:
        """Load the model the run directory's cache points at (:func:`load_external`)."""
        return load_external(path)

    def _paths(self, condition: str, seed: int) -> tuple[dict[str, Any], Path, Path, Path]:
        run_dir = self.run_dir if self.run_dir is not None else Path.cwd().resolve()
        values: dict[str, Any] = {"condition": condition, "seed": seed, "run_dir": str(run_dir)}
        output = Path(_fill("output", self.params["output"], values)).absolute()
        values["output"] = str(output)
        logs = run_dir / "logs"
        stem = f"{condition}__s{seed}"
        return values, output, logs / f"{stem}.log", logs / f"{stem}.injections.jsonl"

    def command(self, condition: TrainingCondition, seed: int) -> tuple[list[str], dict[str, str]]:
        """The argv and the environment (only what the study sets) for one run."""
        values, output, _, injection_log = self._paths(condition.name, seed)
        argv = [_fill("argv", a, values) for a in self.params["argv"]]
        env = {k: _fill("env", v, values) for k, v in self.params["env"].items()}
        env.update({"ROBUSTSTATS_CONDITION": condition.name, "ROBUSTSTATS_SEED": str(seed),
                    "ROBUSTSTATS_OUTPUT": str(output), "ROBUSTSTATS_RUN_DIR": values["run_dir"],
                    INJECTION_LOG_VAR: str(injection_log)})
        if condition.noise is not None:
            env[ENV_VAR] = json.dumps(condition.noise.to_dict(), sort_keys=True)
        if condition.aqn is not None:
            env[AQN_ENV_VAR] = json.dumps(condition.aqn.to_dict(), sort_keys=True)
        return argv, env

    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        _, output, log, injection_log = self._paths(condition.name, seed)
        argv, env = self.command(condition, seed)
        # what the checkpoint depends on; the injection log path is bookkeeping
        fingerprint = hashlib.sha256(json.dumps(
            [argv, {k: v for k, v in env.items() if k != INJECTION_LOG_VAR}],
            sort_keys=True).encode()).hexdigest()
        info = {"trainer": "command", "condition": condition.name, "seed": seed,
                "checkpoint": str(output), "argv": argv, "log": str(log)}
        if (output / MARKER).is_file():
            problem = marker_problem(output, fingerprint)
            if problem is not None:
                raise ExternalTrainingError(f"{problem}: delete it or choose another `output`.")
            marker = json.loads((output / MARKER).read_text(encoding="utf-8"))
            return _load_checkpoint(output, {**info, "reused": True,
                                             "injections": marker.get("injections")})
        start = time.perf_counter()
        code = self._run(argv, env, log, injection_log)
        if code != 0:
            why = "timed out" if code is None else f"exited with code {code}"
            raise ExternalTrainingError(f"command {why}: {argv!r}; last lines of "
                                        f"{str(log)!r}:\n{_tail(log)}")
        if not output.is_dir() or not any(output.iterdir()):
            raise ExternalTrainingError(f"command exited with code 0 but wrote no checkpoint "
                                        f"to {str(output)!r}; last lines of {str(log)!r}:\n"
                                        f"{_tail(log)}")
        summary = None
        if condition.noise is not None and condition.noise.is_active:
            try:
                summary = check_injection_log(injection_log, condition.noise)
            except ExternalTrainingError as exc:
                raise ExternalTrainingError(
                    f"checkpoint {str(output)!r} of {condition.name} seed {seed} refused: "
                    f"{exc}") from None
        model = _load_checkpoint(output, {**info, "reused": False, "injections": summary,
                                          "seconds": round(time.perf_counter() - start, 3)})
        # written last, after every check: only an accepted checkpoint carries it
        atomic_write_bytes(output / MARKER, json.dumps(
            {"fingerprint": fingerprint, "condition": condition.name, "seed": seed,
             "argv": argv, "completed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "injections": summary, "files": _listing(output),
             "identity": _identity(output)}, indent=2).encode())
        return model

    def _run(self, argv: list[str], env: dict[str, str], log: Path,
             injection_log: Path) -> int | None:
        """Run the command with its output appended to ``log``; its exit code, ``None`` on
        timeout. The command's whole process group ends with it (or with us)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        injection_log.unlink(missing_ok=True)  # counts of an earlier attempt do not count
        full_env = {k: v for k, v in os.environ.items()
                    if k not in (ENV_VAR, AQN_ENV_VAR)} | env
        with open(log, "ab") as fh:
            fh.write(f"==> {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
                     f"{json.dumps(argv)}\n".encode())
            fh.flush()
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                        stderr=subprocess.STDOUT, env=full_env,
                                        start_new_session=True, preexec_fn=_die_with_parent)
            except OSError as exc:
                raise ExternalTrainingError(f"cannot start {argv[0]!r}: "
                                            f"{exc.strerror or exc}.") from None
            try:
                return proc.wait(timeout=self.params["timeout"])
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return None
            except BaseException:  # interrupted: the command must not outlive the cell
                _kill_group(proc)
                raise


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that started it dies."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _tail(log: Path, n: int = TAIL_LINES) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) or "(empty log)"


def load_external(path: str | Path) -> TrainedModel:
    """Load what :meth:`ExternalCheckpoint.save` recorded, refusing an incomplete checkpoint."""
    pointer = Path(path) / _POINTER
    if not pointer.is_file():
        return TrainedModel.load(path)
    data = json.loads(pointer.read_text(encoding="utf-8"))
    output = Path(data["checkpoint"])
    problem = marker_problem(output)
    if problem is None and data.get("sha256") is not None:
        # the pointer names the checkpoint by path and by identity: a new checkpoint
        # completed at the same path is not the model the run's cells came from (the
        # marker's identity was just checked against the files)
        if _marked_sha256(output) != data["sha256"]:
            problem = (f"{str(output)!r} holds another checkpoint than the one this model was "
                       "trained as (SHA-256 of its files differs)")
    if problem is not None:
        raise ExternalTrainingError(f"cached model {str(path)!r} points at a checkpoint that is "
                                    f"no longer complete: {problem}.")
    return _load_checkpoint(output, data.get("info", {}))

