"""Identity, not paths: a fit from two captures finds its checkpoint and texts by SHA-256.

Attacked as a migrating user: captures made in one directory and fitted after everything
moved (``--checkpoint``/``--texts``), a checkpoint replaced by another of the same
architecture, re-saved in another dtype, its tokenizer changed, one of its files removed,
the texts reordered or replaced, a texts file gone. Every refusal is one line, exit 2,
before the captures are compared or a model is simulated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from divergence_models import tiny

from robuststats.cli import main
from robuststats.divergence import check_loaded, fit_inputs
from robuststats.divergence._capfile import CaptureReader
from robuststats.errors import InputError
from robuststats.models.identity import checkpoint_identity, identity_difference

N_ITEMS = 8


def _save(model, tok, directory: Path) -> Path:
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """A model directory, a texts file and two captures of them (fp32 and bf16)."""
    root = tmp_path_factory.mktemp("host_a")
    model, tok, texts = tiny("qwen2", n_layers=2)
    _save(model, tok, root / "llama")
    (root / "texts.txt").write_text("\n".join(texts) + "\n")
    for flag, cond, name in (("--reference", "fp32", "ref.npz"),
                             ("--candidate", "bf16", "cand.npz")):
        assert main(["divergence", str(root / "llama"), flag, cond, "--capture",
                     str(root / name), "--texts", str(root / "texts.txt"), "--items",
                     str(N_ITEMS), "--no-progress", "--format", "json"]) == 0
    return root, texts


def _headers(root: Path) -> tuple[dict, dict]:
    with CaptureReader(root / "ref.npz") as a, CaptureReader(root / "cand.npz") as b:
        return a.header, b.header


def _moved(captured, tmp_path) -> Path:
    """Everything of host A copied to another directory, the original out of reach."""
    root, _ = captured
    new = tmp_path / "host_b"
    shutil.copytree(root, new)
    return new


def _refused(capsys, argv: list[str], *expected: str) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    return err


def _fit_argv(captures: Path, out: Path, *extra: str) -> list[str]:
    return ["divergence", str(captures / "ref.npz"), "--candidate", str(captures / "cand.npz"),
            "--fit-noise", str(out / "fit.yaml"), "--out", str(out / "res"), "--no-progress",
            *extra]


def test_a_capture_records_the_checkpoint_and_the_texts(captured):
    root, _ = captured
    ref, cand = _headers(root)
    for header in (ref, cand):
        source = header["source"]
        assert source["checkpoint"] == checkpoint_identity(root / "llama")
        assert {f["role"] for f in source["checkpoint"]["files"].values()} == {
            "weights", "config", "tokenizer"}
        assert source["checkpoint"]["weights_dtype"] == "float32"
        assert len(header["items"]["text_sha256"]) == N_ITEMS
        assert len(source["texts_file_sha256"]) == 64


def test_the_identity_does_not_depend_on_the_place(captured, tmp_path):
    root, _ = captured
    moved = shutil.copytree(root / "llama", tmp_path / "elsewhere" / "qwen")
    a, b = checkpoint_identity(root / "llama"), checkpoint_identity(moved)
    assert a == b and identity_difference(a, b) is None


def test_moved_captures_are_refused_until_relocated_then_verified(captured, tmp_path,
                                                                  capsys):
    new = _moved(captured, tmp_path)
    old_root, _ = captured
    # host B: the recorded paths are host A's; this test makes them absent
    hidden = old_root.with_name(old_root.name + "_away")
    old_root.rename(hidden)
    try:
        _refused(capsys, _fit_argv(new, tmp_path), "`--texts`", "does not exist here",
                 "--texts FILE")
        _refused(capsys, _fit_argv(new, tmp_path, "--texts", str(new / "texts.txt")),
                 "`--checkpoint`", "does not exist here", "--checkpoint DIR")
        ref, cand = _headers(new)
        inputs = fit_inputs(ref, cand, checkpoint=str(new / "llama"),
                            texts=str(new / "texts.txt"))
        assert inputs.checkpoint == new / "llama" and len(inputs.texts) == N_ITEMS
        assert list(inputs.item_ids) == ref["items"]["ids"]
    finally:
        hidden.rename(old_root)


def test_a_replaced_checkpoint_is_refused_naming_its_weights_file(captured, tmp_path,
                                                                  capsys):
    new = _moved(captured, tmp_path)
    other, tok, _ = tiny("qwen2", n_layers=2, seed=1)  # same architecture, other weights
    shutil.rmtree(new / "llama")
    _save(other, tok, new / "llama")
    _refused(capsys, _fit_argv(new, tmp_path, "--checkpoint", str(new / "llama"), "--texts",
                               str(new / "texts.txt")),
             "`--checkpoint`", "is not the checkpoint SOURCE's capture was made from",
             "its weights file 'model.safetensors' differs")
    assert not (tmp_path / "res").exists() and not (tmp_path / "fit.yaml").exists()


def test_a_checkpoint_resaved_in_another_dtype_is_other_weights(captured, tmp_path, capsys):
    import torch

    new = _moved(captured, tmp_path)
    model, tok, _ = tiny("qwen2", n_layers=2)
    shutil.rmtree(new / "llama")
    _save(model.to(torch.bfloat16), tok, new / "llama")
    _refused(capsys, _fit_argv(new, tmp_path, "--checkpoint", str(new / "llama"), "--texts",
                               str(new / "texts.txt")),
             "its weights are saved in bfloat16, not float32 as in SOURCE's capture",
             "re-saved in another dtype holds other weights")


def test_a_changed_tokenizer_and_a_missing_file_are_named(captured, tmp_path, capsys):
    new = _moved(captured, tmp_path)
    argv = _fit_argv(new, tmp_path, "--checkpoint", str(new / "llama"), "--texts",
                     str(new / "texts.txt"))
    tok_file = new / "llama" / "tokenizer.json"
    data = json.loads(tok_file.read_text())
    data["model"]["vocab"]["zzz-new"] = len(data["model"]["vocab"]) + 1000
    tok_file.write_text(json.dumps(data))
    _refused(capsys, argv, "its tokenizer file 'tokenizer.json' differs")
    shutil.copy(captured[0] / "llama" / "tokenizer.json", tok_file)
    (new / "llama" / "generation_config.json").unlink()
    _refused(capsys, argv, "its config file 'generation_config.json' is missing")


def test_reordered_or_replaced_texts_are_refused_naming_the_item(captured, tmp_path, capsys):
    new = _moved(captured, tmp_path)
    _, texts = captured
    swapped = [texts[1], texts[0], *texts[2:]]
    (new / "texts.txt").write_text("\n".join(swapped) + "\n")
    argv = _fit_argv(new, tmp_path, "--checkpoint", str(new / "llama"), "--texts",
                     str(new / "texts.txt"))
    _refused(capsys, argv, "`--texts`", "is not the texts SOURCE's capture was made from",
             "item 'line-00001' differs (the same texts in another order)")
    (new / "texts.txt").write_text("\n".join(f"{i} + {i} = {2 * i}" for i in range(8)) + "\n")
    err = _refused(capsys, argv, "item 'line-00001' differs")
    assert "another order" not in err
    (new / "texts.txt").write_text("1 + 1 = 2\n")
    _refused(capsys, argv, "holds 1 texts; the captures were made from 8")
    # the recorded texts file changed in place (no relocation flag)
    (captured[0] / "texts.txt").write_text("\n".join(swapped) + "\n")
    try:
        _refused(capsys, _fit_argv(captured[0], tmp_path), "`--fit-noise`",
                 "the same texts in another order")
    finally:
        (captured[0] / "texts.txt").write_text("\n".join(texts) + "\n")


def test_the_relocation_flags_belong_to_a_fit_from_captures(captured, tmp_path, capsys):
    root, _ = captured
    _refused(capsys, ["divergence", str(root / "ref.npz"), "--candidate",
                      str(root / "cand.npz"), "--checkpoint", str(root / "llama"),
                      "--no-progress"], "`--checkpoint`", "--fit-noise FILE")
    _refused(capsys, ["divergence", str(root / "ref.npz"), "--candidate",
                      str(root / "cand.npz"), "--texts", str(root / "texts.txt"),
                      "--no-progress"], "`--texts`")
    _refused(capsys, ["divergence", str(root / "llama"), "--candidate", "bf16",
                      "--checkpoint", str(root / "llama"), "--no-progress"],
             "`--checkpoint`")


def test_loaded_weights_and_tokenizer_are_checked_against_both_captures(captured):
    """The check that also covers captures without a recorded checkpoint identity."""
    import torch

    root, _ = captured
    headers = (("SOURCE", _headers(root)[0]), ("--candidate", _headers(root)[1]))
    model, tok, _ = tiny("qwen2", n_layers=2)
    check_loaded(model, tok, headers, flag="--checkpoint", where="x")
    with pytest.raises(InputError, match=r"another dtype is other weights"):
        check_loaded(model.to(torch.bfloat16), tok, headers, flag="--checkpoint", where="x")
    other, _, _ = tiny("qwen2", n_layers=2, seed=3)
    with pytest.raises(InputError, match=r"`--checkpoint`: the weights of 'x' are not those "
                                         r"SOURCE's capture ran"):
        check_loaded(other, tok, headers, flag="--checkpoint", where="x")


@pytest.mark.slow
def test_a_fit_after_moving_everything_runs_on_the_relocated_files(captured, tmp_path,
                                                                   capsys):
    new = _moved(captured, tmp_path)
    capsys.readouterr()
    code = main([*_fit_argv(new, tmp_path, "--checkpoint", str(new / "llama"), "--texts",
                            str(new / "texts.txt")), "--format", "json"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert data["source"]["fit_inputs"] == {"checkpoint": str(new / "llama"),
                                            "texts": str(new / "texts.txt")}
    assert (tmp_path / "fit.yaml").is_file()


def test_a_study_capture_finds_its_checkpoint_through_the_study(captured, tmp_path, capsys):
    """A capture of a study's condition: the study names the checkpoint; moved, it is
    refused with the way to relocate it, and --checkpoint is checked like a model
    directory's."""
    root, _ = captured
    ckpt = shutil.copytree(root / "llama", tmp_path / "ckpt")
    study = tmp_path / "st.yaml"
    study.write_text(f"""name: id_study
version: 1
task: {{name: arithmetic, params: {{n_items: 6, n_train: 10}}}}
conditions:
  ck: {{checkpoint: {ckpt}}}
evaluation: {{noise_levels: [0, 0.05]}}
""")
    runs = tmp_path / "runs"
    for flag, cond, name in (("--reference", "fp32", "ref.npz"),
                             ("--candidate", "bf16", "cand.npz")):
        assert main(["divergence", str(study), flag, cond, "--capture", str(tmp_path / name),
                     "--runs", str(runs), "--no-progress", "--format", "json"]) == 0
    ref, cand = _headers(tmp_path)
    assert ref["source"]["kind"] == "study"
    assert ref["source"]["checkpoint"] == checkpoint_identity(ckpt)
    inputs = fit_inputs(ref, cand, runs=runs)
    assert inputs.study is not None and len(inputs.texts) == 6
    ckpt.rename(tmp_path / "moved")
    _refused(capsys, [*_fit_argv(tmp_path, tmp_path), "--runs", str(runs)],
             "`--checkpoint`: the study's checkpoint of ck seed 0 is not usable here",
             "--checkpoint DIR")
    inputs = fit_inputs(ref, cand, checkpoint=str(tmp_path / "moved"), runs=runs)
    assert inputs.checkpoint == tmp_path / "moved" and len(inputs.texts) == 6
    other, tok, _ = tiny("qwen2", n_layers=2, seed=5)
    _save(other, tok, tmp_path / "other")
    _refused(capsys, [*_fit_argv(tmp_path, tmp_path), "--runs", str(runs),
                      "--checkpoint", str(tmp_path / "other")],
             "'model.safetensors' differs")


def test_a_sharded_checkpoint_names_the_shard_that_differs(tmp_path):
    model, tok, _ = tiny("qwen2", n_layers=2)
    directory = _save_sharded(model, tok, tmp_path / "sharded")
    before = checkpoint_identity(directory)
    shards = sorted(n for n, f in before["files"].items() if f["role"] == "weights")
    assert "model.safetensors.index.json" in shards and len(shards) >= 3
    for name in (shards[1], "model.safetensors.index.json"):  # a shard, then the index
        path = directory / name
        data = bytearray(path.read_bytes())
        data[-2] ^= 0xFF
        path.write_bytes(bytes(data))
        problem = identity_difference(before, checkpoint_identity(directory))
        assert problem is not None and f"its weights file {name!r} differs" in problem
        data[-2] ^= 0xFF
        path.write_bytes(bytes(data))
    assert checkpoint_identity(directory) == before


def _save_sharded(model, tok, directory: Path) -> Path:
    model.save_pretrained(directory, max_shard_size="20KB")
    tok.save_pretrained(directory)
    return directory


def test_the_same_tensors_saved_again_are_accepted_with_a_note(captured, tmp_path):
    """Another safetensors header (metadata, tensor order) holds the same weights: the
    file differs, the loaded weights do not, and the fit goes on saying so."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from robuststats.models.model import load_pretrained

    new = _moved(captured, tmp_path)
    weights = new / "llama" / "model.safetensors"
    with safe_open(str(weights), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in reversed(list(fh.keys()))}
    save_file(tensors, str(weights), metadata={"format": "pt", "converted": "yes"})
    ref, cand = _headers(new)
    inputs = fit_inputs(ref, cand, checkpoint=str(new / "llama"),
                        texts=str(new / "texts.txt"))
    assert "its weights file 'model.safetensors' differs" in inputs.file_difference
    model, tok = load_pretrained(new / "llama")
    note = check_loaded(model, tok, (("SOURCE", ref), ("--candidate", cand)),
                        flag="--checkpoint", where="llama",
                        file_difference=inputs.file_difference)
    assert "the same tensors saved again" in note and "model.safetensors" in note
    other, _, _ = tiny("qwen2", n_layers=2, seed=4)
    with pytest.raises(InputError, match=r"^`--checkpoint`: .* its weights file "
                                         r"'model.safetensors' differs"):
        check_loaded(other, tok, (("SOURCE", ref), ("--candidate", cand)),
                     flag="--checkpoint", where="llama",
                     file_difference=inputs.file_difference)


def test_relative_paths_moved_together_are_found_and_verified(tmp_path, monkeypatch, capsys):
    """Captured as `divergence llama --texts texts.txt` (relative paths), the whole folder
    moved: the recorded paths resolve in the new folder, and are taken only because their
    SHA-256 matches; in another folder they are named with the flag that relocates them."""
    model, tok, texts = tiny("qwen2", n_layers=2)
    host_a = tmp_path / "a"
    _save(model, tok, host_a / "llama")
    (host_a / "texts.txt").write_text("\n".join(texts) + "\n")
    monkeypatch.chdir(host_a)
    for flag, cond, name in (("--reference", "fp32", "ref.npz"),
                             ("--candidate", "bf16", "cand.npz")):
        assert main(["divergence", "llama", flag, cond, "--capture", name, "--texts",
                     "texts.txt", "--items", "4", "--no-progress", "--format", "json"]) == 0
    host_b = tmp_path / "b"
    host_a.rename(host_b)
    monkeypatch.chdir(host_b)
    ref, cand = _headers(host_b)
    assert ref["source"]["path"] == "llama"
    inputs = fit_inputs(ref, cand)
    assert inputs.checkpoint == Path("llama") and len(inputs.texts) == 4
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["divergence", "b/ref.npz", "--candidate", "b/cand.npz", "--fit-noise",
                      "fit.yaml", "--texts", "b/texts.txt", "--no-progress"],
             "`--checkpoint`: the captures' model directory 'llama' does not exist here",
             "--checkpoint DIR")


def test_an_in_process_result_names_its_model_and_texts_by_hash(captured, tmp_path, capsys):
    root, _ = captured
    capsys.readouterr()
    assert main(["divergence", str(root / "llama"), "--candidate",
                 f"{{checkpoint: {root / 'llama'}, name: same}}", "--texts",
                 str(root / "texts.txt"), "--items", "3", "--no-local", "--out",
                 str(tmp_path / "res"), "--no-progress", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    manifest = json.loads((Path(data["path"]) / "manifest.json").read_text())
    sha = checkpoint_identity(root / "llama")["sha256"]
    assert manifest["source"]["checkpoint_sha256"] == sha
    assert manifest["source"]["candidate_checkpoint_sha256"] == sha
    assert manifest["source"]["texts_file_sha256"] == _headers(root)[0]["source"][
        "texts_file_sha256"]
