"""Checkpoint weights the loader would refuse are refused first, by every command, in one
line (issue 23, item 2).

A directory with ``config.json``, tokenizer files and a ``pytorch_model.bin`` whose pickle
would call a function (here the harmless ``os.getpid`` and ``print``: nothing is ever
called) passes every presence check. Loading it is safe (``weights_only``), but before the
fix the study, the probe and the gate failed in a worker with torch's own error, the gate
after its evaluation, and ``divergence`` with an uncaught ``UnpicklingError``. Now each
command refuses it before any model is loaded: exit 2, one line naming the file and the
reason (``torch.load`` is made to fail the test if anything reaches it).
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
import struct
import zipfile

import pytest
import yaml

from robuststats.cli import main
from robuststats.errors import InputError

SIZES = {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64}


class _CallsGetpid:
    def __reduce__(self):
        return (os.getpid, ())


class _CallsPrint:
    def __reduce__(self):
        return (print, ("x",))


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """``good`` (safetensors), ``zipbin`` (torch.save's zip), ``legacy`` (torch's legacy
    format) and ``evil`` (torch.save of a pickle that would call ``os.getpid``)."""
    import torch

    from robuststats.models.model import build_model, build_tokenizer
    from robuststats.models.trainer import TrainedModel

    root = tmp_path_factory.mktemp("ckpts")
    tokenizer = build_tokenizer(["####"])
    model = build_model(tokenizer, SIZES)
    good = TrainedModel(model, tokenizer).save(root / "good")
    state = model.state_dict()
    for name, legacy in (("zipbin", False), ("legacy", True), ("evil", None)):
        shutil.copytree(good, root / name)
        (root / name / "model.safetensors").unlink()
        target = root / name / "pytorch_model.bin"
        if legacy is None:
            torch.save({"model": state, "x": _CallsGetpid()}, target)
        else:
            torch.save(state, target, _use_new_zipfile_serialization=not legacy)
    return root


def _variant(ckpts, tmp_path, name, *, bin_bytes=None, files=None):
    """A copy of ``good`` with ``pytorch_model.bin`` (instead of safetensors) or other files."""
    path = tmp_path / name
    shutil.copytree(ckpts / "good", path)
    if bin_bytes is not None:
        (path / "model.safetensors").unlink()
        (path / "pytorch_model.bin").write_bytes(bin_bytes)
    for file, data in (files or {}).items():
        (path / file).write_bytes(data)
    return path


def check_weights(path, *, key):
    from robuststats.models.weights import check_weights

    return check_weights(path, key=key)


def _refused(path, pattern):
    with pytest.raises(InputError, match=pattern) as info:
        check_weights(path, key="checkpoint")
    message = str(info.value)
    assert "\n" not in message and message.startswith("`checkpoint`: '")
    return message


def test_loadable_weights_pass(ckpts):
    assert check_weights(ckpts / "good", key="k").name == "model.safetensors"
    assert check_weights(ckpts / "zipbin", key="k").name == "pytorch_model.bin"
    assert check_weights(ckpts / "legacy", key="k").name == "pytorch_model.bin"


def test_a_pickle_that_calls_a_function_is_refused_naming_it(ckpts, tmp_path):
    message = _refused(ckpts / "evil", r"would call posix\.getpid")
    assert str(ckpts / "evil" / "pytorch_model.bin") in message
    # a plain pickle (protocol 4, as pickle.dump writes it) and a protocol-2 one
    for protocol, reason in ((4, r"instruction FRAME"), (2, r"would call builtins\.print")):
        evil = _variant(ckpts, tmp_path, f"p{protocol}",
                        bin_bytes=pickle.dumps({"w": _CallsPrint()}, protocol=protocol))
        _refused(evil, reason)


@pytest.mark.parametrize("name,data,reason", [
    ("empty", b"", r"is empty|cannot be read"),
    ("garbage", b"\xffnot a pickle" * 10, r"cannot be read"),
    ("long_string", b"\x80\x02X\xff\xff\xff\x7f", r"cannot be read"),
    ("zip_without_pickle", None, r"without one data\.pkl"),
    ("not_legacy", pickle.dumps(3, protocol=2), r"neither torch\.save's zip"),
])
def test_damaged_torch_files_are_refused(ckpts, tmp_path, name, data, reason):
    if data is None:
        zipped = tmp_path / "z.zip"
        with zipfile.ZipFile(zipped, "w") as archive:
            archive.writestr("archive/other.txt", "x")
        data = zipped.read_bytes()
    _refused(_variant(ckpts, tmp_path, name, bin_bytes=data), reason)


def test_damaged_safetensors_are_refused(ckpts, tmp_path):
    raw = (ckpts / "good" / "model.safetensors").read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    cases = {
        "truncated": (raw[: len(raw) // 2], r"lies outside the file|cover"),
        "header_too_long": (struct.pack("<Q", 10**12) + raw[8:], r"not a safetensors file"),
        "header_not_json": (raw[:8] + b"{" * length + raw[8 + length:], r"header is not JSON"),
        "tiny": (b"abc", r"no header"),
    }
    for name, (data, reason) in cases.items():
        _refused(_variant(ckpts, tmp_path, name, files={"model.safetensors": data}), reason)


def test_an_index_names_only_shards_beside_it(ckpts, tmp_path):
    def index(weight_map):
        return json.dumps({"metadata": {}, "weight_map": weight_map}).encode()

    for name, weight_map, reason in (
            ("escape", {"a": "../../x.safetensors"}, r"not a file beside it"),
            ("absent", {"a": "model-00001.safetensors"}, r"does not exist"),
            ("empty", {}, r"no `weight_map`")):
        path = _variant(ckpts, tmp_path, name,
                        files={"model.safetensors.index.json": index(weight_map)})
        (path / "model.safetensors").unlink()
        _refused(path, reason)
    # a shard that is the evil pickle, named by a .bin index
    path = tmp_path / "sharded"
    shutil.copytree(ckpts / "evil", path)
    (path / "pytorch_model.bin").rename(path / "pytorch_model-00001-of-00001.bin")
    (path / "pytorch_model.bin.index.json").write_bytes(
        index({"x": "pytorch_model-00001-of-00001.bin"}))
    assert "pytorch_model-00001-of-00001.bin" in _refused(path, r"would call posix\.getpid")


# ---------------------------------------------------------------------- every command
@pytest.fixture
def no_torch_load(monkeypatch):
    """Fail the test if anything reaches ``torch.load``: the refusal must come first."""
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("torch.load was reached")

    monkeypatch.setattr(torch, "load", refuse)


def _one_line_error(capsys, argv, evil_file, command):
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"robuststats {command}: error: ")
    assert str(evil_file) in err and "would call posix.getpid" in err
    return err


def _study(tmp_path, checkpoint, **extra):
    data = {"name": "evil", "version": 1,
            "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 8, "n_train": 40}},
            "conditions": {"A": {"checkpoint": str(checkpoint)}},
            "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1},
            "seeds": 1, **extra}
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_study_refuses_it_in_check_and_before_any_cell(ckpts, tmp_path, capsys, no_torch_load):
    study = _study(tmp_path, ckpts / "evil")
    evil_file = ckpts / "evil" / "pytorch_model.bin"
    for extra in (["--check"], ["--workers", "1", "--no-progress"]):
        err = _one_line_error(capsys, ["study", str(study), "--out", str(tmp_path / "r"),
                                       "--runs", str(tmp_path / "runs"), *extra],
                              evil_file, "study")
        assert "conditions.A.checkpoint" in err
    assert not (tmp_path / "runs" / "evil" / "cells").exists()


def test_diagnose_refuses_it_before_loading(ckpts, tmp_path, capsys, no_torch_load):
    study = _study(tmp_path, ckpts / "evil")
    _one_line_error(capsys, ["diagnose", str(study), "--levels", "operator", "--out",
                             str(tmp_path / "r"), "--runs", str(tmp_path / "runs"),
                             "--no-progress"], ckpts / "evil" / "pytorch_model.bin",
                    "diagnose")


def test_divergence_refuses_it_as_source_and_as_candidate(ckpts, tmp_path, capsys,
                                                          no_torch_load):
    evil_file = ckpts / "evil" / "pytorch_model.bin"
    common = ["--items", "4", "--out", str(tmp_path / "r"), "--no-progress"]
    _one_line_error(capsys, ["divergence", str(ckpts / "evil"), "--candidate", "fp16",
                             *common], evil_file, "divergence")
    _one_line_error(capsys, ["divergence", str(ckpts / "good"), "--candidate",
                             f"{{checkpoint: {ckpts / 'evil'}}}", *common], evil_file,
                    "divergence")
    # a study SOURCE whose condition is the checkpoint
    _one_line_error(capsys, ["divergence", str(_study(tmp_path, ckpts / "evil")),
                             "--candidate", "fp16", "--runs", str(tmp_path / "runs"),
                             *common], evil_file, "divergence")


def test_gate_refuses_it_before_evaluating(ckpts, tmp_path, capsys, no_torch_load):
    import pandas as pd

    from robuststats.results import ResultStore, cell_digests
    from robuststats.runs.spec import StudySpec
    from robuststats.stats import simulate_outcomes

    spec = StudySpec.from_dict({
        "name": "base", "version": 1,
        "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 8, "n_train": 40}},
        "conditions": {"A": {}}, "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1},
        "seeds": 3})
    outcomes: pd.DataFrame = simulate_outcomes(3, 8, eval_noise=(0.0, 0.05), rng=1)
    outcomes = outcomes[outcomes["condition"] == outcomes["condition"].iloc[0]]
    outcomes = outcomes.assign(condition="A")
    version = ResultStore(tmp_path / "results").publish(
        "base", lambda path, n: outcomes.to_parquet(path / "outcomes.parquet", index=False),
        {"spec": copy.deepcopy(spec.resolved()), "seeds": spec.seed_list(),
         "cells": cell_digests(outcomes)})
    _one_line_error(capsys, ["gate", str(ckpts / "evil"), "--baseline", str(version.path),
                             "--max-degradation", "0.2", "--no-progress"],
                    ckpts / "evil" / "pytorch_model.bin", "gate")


def test_files_that_pass_the_check_but_not_the_loader_are_one_line(ckpts, tmp_path):
    """A .bin archive missing one tensor's storage, or a config.json that is a list: the
    loader's own error, one line, naming the directory (before: a traceback)."""
    from robuststats.models.model import load_pretrained

    path = _variant(ckpts, tmp_path, "nostorage", bin_bytes=b"")
    with zipfile.ZipFile(ckpts / "zipbin" / "pytorch_model.bin") as src, \
            zipfile.ZipFile(path / "pytorch_model.bin", "w") as dst:
        for name in src.namelist():
            if not name.endswith("/data/3"):
                dst.writestr(name, src.read(name))
    listed = _variant(ckpts, tmp_path, "configlist", files={"config.json": b"[1, 2]"})
    for bad in (path, listed):
        check_weights(bad, key="k")  # the headers and the pickle are fine
        with pytest.raises(InputError, match=r"^`path`: cannot load a model from '") as info:
            load_pretrained(bad)
        assert "\n" not in str(info.value) and str(bad) in str(info.value)
