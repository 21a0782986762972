"""The model and texts of a fit from two captures: found by identity, not by path.

A capture records where its model and texts came from (``source``: a model directory or
a study file, a texts file) and what they were: the checkpoint's identity
(:func:`~robuststats.models.identity.checkpoint_identity`: the SHA-256 of its weight,
config and tokenizer files), the SHA-256 of the texts (all of them, and of each item) and
of the weights as loaded (``model.weights_sha256``). A fit from two captures simulates the
reference model on the same texts, so before anything is loaded or computed
:func:`fit_inputs` finds them, at the recorded place or where ``--checkpoint DIR`` and
``--texts FILE`` say they are now, and refuses, in one line naming the file, a checkpoint
or texts that are not the ones **both** captures were made from. After loading,
:func:`check_loaded` compares the weights' and tokenizer's own digests with both captures
(the check that also covers captures written before checkpoint identities were
recorded). When only weight files differ, in the same dtype, the refusal waits for that
check: the same tensors saved again (another safetensors header, another format) pass
with a note; other weights are refused naming the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats.errors import InputError

__all__ = ["FitInputs", "check_loaded", "fit_inputs", "result_identity", "source_identity",
           "text_digests"]

_BUILTIN_TEXTS = "arithmetic task, test split"


@dataclass(frozen=True)
class FitInputs:
    """What a fit from two captures runs: a model directory (or a study's model) and the
    captures' texts and item ids, each checked against both captures."""

    #: the model directory to load, or None for the study's model (``study``)
    checkpoint: Path | None
    #: ``{"source", "condition", "seed", "runs"}`` of a study's model, or None
    study: dict[str, Any] | None
    texts: tuple[str, ...]
    item_ids: tuple[str, ...]
    #: where the model and texts were found (for the result's source record)
    origin: dict[str, Any]
    #: the refusal of a checkpoint whose files differ from the captured ones in the same
    #: weights dtype, held until the loaded weights are compared (:func:`check_loaded`)
    file_difference: str | None = None


def text_digests(texts: Sequence[str]) -> list[str]:
    """The first 16 hex digits of each text's SHA-256 (a capture's ``items.text_sha256``)."""
    return [hashlib.sha256(t.encode("utf-8")).hexdigest()[:16] for t in texts]


def _texts_sha256(texts: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(texts)).encode("utf-8")).hexdigest()


def source_identity(info: dict[str, Any], texts_file: str | None) -> dict[str, Any]:
    """The identities a capture records beside its ``source``: the checkpoint of the model
    directory (or of the study's model directory, when it is a saved checkpoint) and the
    SHA-256 of the texts file."""
    from robuststats.models.identity import checkpoint_identity, file_sha256
    from robuststats.models.weights import weight_file

    out: dict[str, Any] = {}
    directory = info.get("path") if info.get("kind") == "model" else info.get("model_dir")
    if isinstance(directory, str) and weight_file(Path(directory)) is not None:
        out["checkpoint"] = checkpoint_identity(directory, key="SOURCE")
    if texts_file is not None:
        out["texts_file_sha256"] = file_sha256(texts_file)
    return out


def result_identity(info: dict[str, Any], *, texts_file: str | None = None,
                    candidate_checkpoint: str | None = None) -> dict[str, Any]:
    """The SHA-256 a divergence result records beside the paths it names: SOURCE's
    checkpoint (a model directory, or the study's model directory), a candidate
    ``checkpoint`` and the texts file (the whole identities are in a capture; a result
    names its inputs by hash)."""
    from robuststats.models.identity import checkpoint_identity

    found = source_identity(info, texts_file)
    out: dict[str, Any] = {}
    if "checkpoint" in found:
        out["checkpoint_sha256"] = found["checkpoint"]["sha256"]
    if candidate_checkpoint is not None:
        out["candidate_checkpoint_sha256"] = checkpoint_identity(
            candidate_checkpoint, key="--candidate.checkpoint")["sha256"]
    if "texts_file_sha256" in found:
        out["texts_file_sha256"] = found["texts_file_sha256"]
    return out


def _origin(header: dict[str, Any]) -> dict[str, Any]:
    value = header.get("source")
    return value if isinstance(value, dict) else {}


def _texts(reference: dict[str, Any], texts: str | None, have_study: bool,
           runs: str | Path) -> tuple[list[str], str, str]:
    """The texts, the flag that names them and their file (or what they are)."""
    from robuststats.divergence._sources import read_texts

    origin = _origin(reference)
    if texts is not None:
        return read_texts(texts, name="--texts")[0], "--texts", texts
    recorded = origin.get("texts_file")
    if isinstance(recorded, str):
        if not Path(recorded).is_file():
            raise InputError(f"`--texts`: the captures' texts file {recorded!r} does not exist "
                             "here; give its new place with --texts FILE.")
        return read_texts(recorded, name="--fit-noise (the capture's texts)")[0], \
            "--fit-noise", recorded
    if origin.get("kind") == "model" and origin.get("texts") == _BUILTIN_TEXTS:
        from robuststats.models.tasks import get_task

        items = get_task("arithmetic").items("test")
        return [it.prompt + it.solution for it in items], "--fit-noise", _BUILTIN_TEXTS
    if origin.get("kind") == "study" and have_study:
        from robuststats.runs import build_task, planned_items
        from robuststats.runs.spec import StudySpec

        # the task alone (not the study's preflight): its checkpoints may have moved
        spec = StudySpec.from_file(origin["path"])
        items = planned_items(spec, build_task(spec))
        return [it.prompt + (it.solution or "") for it in items], "--fit-noise", \
            f"{origin['path']}: evaluation items"
    raise InputError("`--texts`: the reference capture does not record its texts file; give "
                     "the texts it was made from with --texts FILE.")


def _check_texts(texts: list[str], headers: Sequence[tuple[str, dict[str, Any]]],
                 flag: str, where: str) -> tuple[str, ...]:
    """The first ``n`` texts, refused unless both captures were made from exactly them."""
    n = len(headers[0][1]["items"]["ids"])
    if len(texts) < n:
        raise InputError(f"`{flag}`: {where!r} holds {len(texts)} texts; the captures were "
                         f"made from {n}.")
    kept = texts[:n]
    digest, per_item = _texts_sha256(kept), text_digests(kept)
    for name, header in headers:
        items = header["items"]
        if items.get("texts_sha256") == digest:
            continue
        what = f"the texts {name}'s capture was made from"
        recorded = items.get("text_sha256")
        if isinstance(recorded, list) and len(recorded) == n:
            bad = next(i for i, (a, b) in enumerate(zip(recorded, per_item, strict=True))
                       if a != b)
            order = " (the same texts in another order)" \
                if sorted(recorded) == sorted(per_item) else ""
            raise InputError(f"`{flag}`: {where!r} is not {what}: item "
                             f"{items['ids'][bad]!r} differs{order}.")
        raise InputError(f"`{flag}`: {where!r} is not {what} (SHA-256 of its first {n} texts "
                         f"{digest[:12]}... against {str(items.get('texts_sha256'))[:12]}...).")
    return tuple(kept)


def _study_model_dir(origin: dict[str, Any], runs: str | Path) -> Path:
    """The directory the study's model is loaded from (its checkpoint, or the run
    directory's published model), refused when the model would have to be trained."""
    from robuststats.runs.spec import StudySpec

    spec = StudySpec.from_file(origin["path"])
    condition, seed = origin.get("condition"), origin.get("seed")
    if condition not in spec.conditions or seed not in spec.seed_list():
        raise InputError(f"`--fit-noise`: the capture's study {origin['path']!r} no longer has "
                         f"condition {condition!r} and seed {seed!r}; give the model with "
                         "--checkpoint DIR.")
    pattern = spec.conditions[condition].checkpoint
    if pattern is not None:
        from robuststats.models.checkpoints import resolve_checkpoint

        try:
            return resolve_checkpoint(pattern, condition=condition, seed=seed).path
        except InputError as exc:
            raise InputError(f"`--checkpoint`: the study's checkpoint of {condition} seed "
                             f"{seed} is not usable here ({str(exc).rstrip('.')}); give its "
                             "new place with --checkpoint DIR.") from None
    from robuststats.runs.plan import TrainJob

    model = Path(runs) / spec.name / "models" / TrainJob(condition, seed).key / "model"
    if not model.is_dir():
        raise InputError(f"`--runs`: the study's model of {condition} seed {seed} is not in "
                         f"{str(Path(runs))!r} (it would be trained again, not the captured "
                         "one); give it with --checkpoint DIR or the run directories with "
                         "--runs.")
    return model


def fit_inputs(reference: dict[str, Any], candidate: dict[str, Any], *,
               checkpoint: str | None = None, texts: str | None = None,
               runs: str | Path = "runs",
               names: tuple[str, str] = ("SOURCE", "--candidate")) -> FitInputs:
    """The model directory and texts of a fit from the captures whose headers are
    ``reference`` and ``candidate`` (module docstring), checked without loading a model.

    Raises :class:`InputError` (one line, naming the flag and the file) when the recorded
    model directory, study or texts file is gone and no relocation flag is given, or when
    the checkpoint or the texts are not the ones both captures were made from.
    """
    from robuststats.divergence._sources import check_source
    from robuststats.models.identity import (
        checkpoint_identity,
        differing_roles,
        identity_difference,
    )
    from robuststats.models.weights import weight_file

    origin = _origin(reference)
    headers = ((names[0], reference), (names[1], candidate))
    kind, path = origin.get("kind"), origin.get("path")
    if kind not in ("model", "study") or not isinstance(path, str):
        if checkpoint is None:
            raise InputError("`--checkpoint`: the reference capture does not name the model "
                             "directory or study it was made from; give it with "
                             "--checkpoint DIR.")
    have_study = kind == "study" and Path(str(path)).is_file()
    if kind == "study" and not have_study and (checkpoint is None or texts is None):
        raise InputError(f"`--fit-noise`: the capture's study file {path!r} does not exist "
                         "here; give the model with --checkpoint DIR and the texts with "
                         "--texts FILE.")
    # the texts first: reading them is cheap, hashing a checkpoint is not
    all_texts, text_flag, text_where = _texts(reference, texts, have_study, runs)
    kept = _check_texts(all_texts, headers, text_flag, text_where)
    study = None
    if checkpoint is not None:
        flag, directory = "--checkpoint", Path(checkpoint)
        if check_source(checkpoint, name=flag) != "model":
            raise InputError(f"`--checkpoint`: {checkpoint!r} must be a model directory "
                             "(save_pretrained, with its tokenizer).")
    elif kind == "model":
        flag, directory = "--fit-noise", Path(str(path))
        if not directory.exists():
            raise InputError(f"`--checkpoint`: the captures' model directory {path!r} does "
                             "not exist here; give its new place with --checkpoint DIR.")
        check_source(str(path), name="--fit-noise (the capture's model directory)")
    else:
        flag, directory = "--fit-noise", _study_model_dir(origin, runs)
        study = {"source": path, "condition": origin.get("condition"),
                 "seed": origin.get("seed"), "runs": runs}
    recorded = [(name, _origin(h).get("checkpoint")) for name, h in headers]
    difference: str | None = None
    # a command trainer's cached model is a pointer: its weights are checked once loaded
    if any(rec is not None for _, rec in recorded) and weight_file(directory) is not None:
        current = checkpoint_identity(directory, key=flag)
        for name, rec in recorded:
            if rec is None:
                continue
            problem = identity_difference(rec, current, what=f"{name}'s capture")
            if problem is None:
                continue
            message = (f"`{flag}`: {str(directory)!r} is not the checkpoint {name}'s capture "
                       f"was made from: {problem}.")
            dtype = rec.get("weights_dtype") if isinstance(rec, dict) else None
            if dtype != current["weights_dtype"] \
                    or differing_roles(rec, current) != {"weights"} or not all(
                    isinstance(h.get("model"), dict) and h["model"].get("weights_sha256")
                    for _, h in headers):
                raise InputError(message)
            # other weight files only, in the same dtype (the same tensors saved again, in
            # another format or header): accepted if the loaded weights are both captures'
            difference = difference or message
    return FitInputs(None if study is not None else directory, study, kept,
                     tuple(str(i) for i in reference["items"]["ids"]),
                     {"checkpoint": str(directory), "texts": text_where}, difference)


def check_loaded(model: Any, tokenizer: Any, headers: Sequence[tuple[str, dict[str, Any]]],
                 *, flag: str, where: str, file_difference: str | None = None) -> str | None:
    """Refuse a loaded model whose weights (in the dtype they were loaded in) or tokenizer
    are not those both captures recorded (``model.weights_sha256``, ``tokenizer``).

    ``file_difference`` (:attr:`FitInputs.file_difference`): the checkpoint's weight files
    (only they) differ from the captured ones, in the same dtype. It is the refusal unless
    the loaded weights and vocabulary are both captures' and the config the reference
    capture's (the same tensors saved again, in another format or header); then it comes
    back as a note.
    """
    from robuststats.divergence._capture import model_identity, tokenizer_identity

    weights = model_identity(model)
    tok = tokenizer_identity(tokenizer)
    if file_difference is not None:
        first = headers[0][1].get("model") if isinstance(headers[0][1].get("model"),
                                                         dict) else {}
        same = first.get("config_sha256") == weights["config_sha256"] and all(
            isinstance(h.get("model"), dict)
            and h["model"].get("weights_sha256") == weights["weights_sha256"]
            and isinstance(h.get("tokenizer"), dict)
            and h["tokenizer"].get("vocab_sha256") == tok["vocab_sha256"]
            for _, h in headers)
        if not same:
            raise InputError(file_difference)
        what = file_difference.split(" was made from: ", 1)[-1].rstrip(".")
        return (f"{where}: {what}, but its weights as loaded are the ones both captures ran "
                "(the same tensors saved again)")
    for name, header in headers:
        model_rec = header.get("model") if isinstance(header.get("model"), dict) else {}
        if model_rec.get("weights_sha256") not in (None, weights["weights_sha256"]):
            dtype = "" if model_rec.get("dtype") in (None, weights["dtype"]) else \
                (f"; they load as {weights['dtype']}, {name}'s capture ran "
                 f"{model_rec.get('dtype')}: another dtype is other weights")
            raise InputError(f"`{flag}`: the weights of {where!r} are not those {name}'s "
                             f"capture ran (SHA-256 {weights['weights_sha256'][:12]}... against "
                             f"{str(model_rec['weights_sha256'])[:12]}...){dtype}.")
        tok_rec = header.get("tokenizer") if isinstance(header.get("tokenizer"), dict) else {}
        if tok_rec.get("vocab_sha256") not in (None, tok["vocab_sha256"]):
            raise InputError(f"`{flag}`: the tokenizer of {where!r} is not the one {name}'s "
                             "capture used (its vocabulary differs).")
    return None
