"""Captures of one run and their comparison: the sketch's stated error, agreement with the
in-process comparison, identical runs, two processes, and refused files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from divergence_models import tiny

from robuststats.divergence import (
    CaptureReader,
    SketchParams,
    capture_run,
    compare_captures,
    compare_runs,
)
from robuststats.divergence._sketch import estimate, item_sketch, subset_positions
from robuststats.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qwen():
    return tiny("qwen2", n_layers=3)


def test_subset_positions_are_reproducible_uniform_and_keyed():
    p = SketchParams(subset_size=64, projection_dim=16, seed=3)
    pos = subset_positions(p, "model.layers.0", "item-1", (10, 50))
    assert pos.dtype == np.int64 and pos.size == 64 and np.unique(pos).size == 64
    assert (np.diff(pos) > 0).all() and pos.min() >= 0 and pos.max() < 500
    assert np.array_equal(pos, subset_positions(p, "model.layers.0", "item-1", (10, 50)))
    for other in (("model.layers.1", "item-1", (10, 50)), ("model.layers.0", "item-2",
                                                           (10, 50)),
                  ("model.layers.0", "item-1", (50, 10))):
        assert not np.array_equal(pos, subset_positions(p, *other))
    assert subset_positions(p, "s", "i", (3, 5)).tolist() == list(range(15))  # n <= K: all
    # uniform: over 400 items each of the 500 positions is drawn with probability 64/500
    counts = np.zeros(500)
    for i in range(400):
        counts[subset_positions(p, "s", f"i{i}", (10, 50))] += 1
    expected = 400 * 64 / 500
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # R: qchisq(c(0.001, 0.999), 499) -> 398.9 608.4 (variance a bit below binomial's)
    assert 380 < chi2 < 610, chi2


def test_projection_error_is_the_stated_one():
    """‖S d‖² is unbiased for ‖d‖² with relative SD √(2/k)·√(1 − Σd⁴/‖d‖⁴) ≤ √(2/k)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((12, 40))
    a[:, 5] *= 15  # an outlier channel, as LLM activations have
    b = a * (1 + 0.02 * rng.standard_normal(a.shape)) + 0.01 * rng.standard_normal(a.shape)
    d = (b - a).ravel()
    true_sq = float(d @ d)
    k = 64
    est = []
    for seed in range(600):
        p = SketchParams(subset_size=32, projection_dim=k, seed=seed)
        sa, sb = item_sketch(a, p, "s", "i"), item_sketch(b, p, "s", "i")
        est.append(float(np.sum((sb["sketch"] - sa["sketch"]) ** 2)))
    est = np.asarray(est) / true_sq
    sd = math.sqrt(2 / k) * math.sqrt(1 - float((d ** 4).sum()) / true_sq ** 2)
    assert abs(est.mean() - 1) < 4 * sd / math.sqrt(600)
    assert est.std(ddof=1) == pytest.approx(sd, rel=0.12)  # SE of an SD over 600: 2.9 %
    assert sd <= math.sqrt(2 / k)


def test_subset_estimates_and_their_standard_errors():
    """Over many seeds the MAPE and WAPE estimates scatter around the truth by their SE."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = (a * (1 + 0.05 * rng.standard_normal(a.shape))).astype(np.float32)
    a64, d = a.astype(float), b.astype(float) - a.astype(float)
    ape = np.abs(d) / (np.abs(a64) + 0.01 * math.sqrt(float((a64 ** 2).mean())))
    truth = {"mape": ape.mean(), "wape": np.abs(d).sum() / np.abs(a64).sum()}
    z: dict[str, list[float]] = {"mape": [], "wape": []}
    for seed in range(300):
        p = SketchParams(subset_size=150, projection_dim=32, seed=seed)
        e = estimate(item_sketch(a, p, "s", "i"), item_sketch(b, p, "s", "i"), n_rows=20,
                     n_features=30, projection_dim=32, eps=0.01)
        for key in z:
            z[key].append((e[key] - truth[key]) / e[f"{key}_se"])
    for key, values in z.items():
        v = np.asarray(values)
        assert abs(v.mean()) < 0.25, key
        assert 0.8 < v.std() < 1.25, key
    # every element in the subset: exact, with SE 0
    p = SketchParams(subset_size=600, projection_dim=32)
    e = estimate(item_sketch(a, p, "s", "i"), item_sketch(b, p, "s", "i"), n_rows=20,
                 n_features=30, projection_dim=32, eps=0.01)
    assert e["mape"] == pytest.approx(truth["mape"], rel=1e-12) and e["mape_se"] == 0
    assert e["mdape"] == pytest.approx(np.sort(ape.ravel())[(ape.size - 1) // 2], rel=1e-12)


def _captures(tmp_path, model, tok, texts, ref, cand, **kw):
    a = capture_run(model, tok, texts, tmp_path / "a.npz", condition=ref, **kw)
    b = capture_run(model, tok, texts, tmp_path / "b.npz", condition=cand, **kw)
    return a, b


def test_identical_runs_give_zero_exactly(qwen, tmp_path):
    model, tok, texts = qwen
    a, _ = _captures(tmp_path, model, tok, texts[:5], "fp32", "fp32", batch_size=3)
    assert a.n_items == 5 and a.n_sites > 10
    div = compare_captures(tmp_path / "a.npz", tmp_path / "b.npz")
    for metric in ("mape", "mdape", "wape", "rel_rms", "err_norm", "rel_rms_se", "mape_se"):
        assert (div.items[metric] == 0).all(), metric
    assert (div.items["cosine"] == 1).all()
    assert div.reference.name == "fp32 (a.npz)" and div.candidate.name == "fp32 (b.npz)"
    assert any("no local pass" in n for n in div.notes)
    assert not any("models differ" in n for n in div.notes)


@pytest.mark.parametrize("candidate", ["bf16", "nvfp4_weights"])
def test_agrees_with_the_in_process_comparison_within_the_stated_error(qwen, tmp_path,
                                                                       candidate):
    model, tok, texts = qwen
    _captures(tmp_path, model, tok, texts, "fp32", candidate, batch_size=6)
    cap = compare_captures(tmp_path / "a.npz", tmp_path / "b.npz")
    inproc = compare_runs(model, tok, texts, reference="fp32", candidate=candidate,
                          batch_size=6, local=False)
    m = cap.items.merge(inproc.items, on=["mode", "site", "item_id"], suffixes=("", "_x"))
    assert len(m) == len(inproc.items) == len(cap.items)
    np.testing.assert_allclose(m["ref_norm"], m["ref_norm_x"], rtol=1e-12)  # exact
    m = m[m["rel_rms_x"] > 0]  # the embedding is not perturbed by NVFP4 weights
    for metric in ("rel_rms", "mape", "wape", "cosine"):
        z = (m[metric] - m[f"{metric}_x"]) / m[f"{metric}_se"]
        assert abs(z.mean()) < 0.3, (metric, z.mean())
        assert 0.75 < z.std() < 1.3, (metric, z.std())  # the stated SE is the actual one
    # per module: the mean over items within 4 sketch SEs of the in-process mean
    t = cap.modules.merge(inproc.modules, on=["mode", "site"], suffixes=("", "_x"))
    for metric in ("rel_rms", "mape", "wape"):
        gap = (t[metric] - t[f"{metric}_x"]).abs()
        assert (gap <= 4 * t[f"{metric}_sketch_se"] + 1e-15).all(), metric
        # and the sketch's share of the interval is small: the between-item spread dominates
        half = (t[f"{metric}_ci_high"] - t[f"{metric}_ci_low"]) / 2
        assert (t[f"{metric}_sketch_se"] <= half + 1e-15).all(), metric
    assert cap.depth["layer"].tolist() == [0, 1, 2]
    assert cap.depth["local_rel_rms"].isna().all() and cap.fit.verdict is None
    assert math.isfinite(cap.fit.slope)
    # no local pass: no accumulation keys in the record, and the reason after the verdict
    record = cap.fit.to_dict()
    assert cap.fit.accumulation is None and "amplification" not in record
    assert list(record)[-2:] == ["verdict", "verdict_note"]
    assert record["verdict_note"] == "captures have no local pass"


@pytest.mark.slow
def test_captures_from_two_processes(tmp_path):
    model, tok, _ = tiny("qwen2", n_layers=2)
    model_dir = tmp_path / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    code = ("import sys, torch; torch.set_num_threads(1);"
            "from robuststats.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for cond, name in (("fp32", "gpu.npz"), ("bf16", "npu.npz")):
        done = subprocess.run([sys.executable, "-c", code, "divergence", str(model_dir),
                               "--reference", cond, "--capture", str(tmp_path / name),
                               "--items", "8", "--batch-size", "4", "--no-progress"],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    cap = compare_captures(tmp_path / "gpu.npz", tmp_path / "npu.npz")
    from robuststats.models.model import load_pretrained

    loaded, ltok = load_pretrained(str(model_dir), key="SOURCE")
    from robuststats.models.tasks import get_task

    items = get_task("arithmetic").items("test")[:8]
    inproc = compare_runs(loaded, ltok, [it.prompt + it.solution for it in items],
                          item_ids=[it.item_id for it in items], reference="fp32",
                          candidate="bf16", batch_size=4, local=False)
    t = cap.modules.merge(inproc.modules, on=["mode", "site"], suffixes=("", "_x"))
    assert len(t) == len(inproc.modules)
    gap = (t["rel_rms"] - t["rel_rms_x"]).abs()
    assert (gap <= 4 * t["rel_rms_sketch_se"] + 1e-15).all()
    header = CaptureReader(tmp_path / "npu.npz").header
    assert header["condition"]["dtype"] == "bfloat16"
    assert header["model"]["weights_sha256"] == \
        CaptureReader(tmp_path / "gpu.npz").header["model"]["weights_sha256"]


@pytest.fixture(scope="module")
def base(qwen, tmp_path_factory):
    model, tok, texts = qwen
    path = tmp_path_factory.mktemp("cap") / "base.npz"
    capture_run(model, tok, texts[:4], path, condition="fp32", batch_size=4,
                subset_size=64, projection_dim=32)
    return path


@pytest.mark.parametrize("change, message", [
    ({"n_items": 3}, r"`candidate`: the captures differ in their items: 4 against 3"),
    ({"item_ids": ["a", "b", "c", "d"]}, r"their items: item 0 is 'item-00000' against 'a'"),
    ({"max_length": 20}, r"the token count of item 'item-00000' \(tokenizer or --max-length\)"),
    ({"modules": ["residual"]}, r"their sites: site 'model.embed_tokens' \(--modules"),
    ({"subset_size": 65}, r"their sketch parameters: subset_size 64 against 65"),
    ({"sketch_seed": 1}, r"their sketch parameters: seed 0 against 1"),
])
def test_mismatched_captures_are_refused(qwen, base, tmp_path, change, message):
    model, tok, texts = qwen
    kw = {"batch_size": 4, "subset_size": 64, "projection_dim": 32, **change}
    n = kw.pop("n_items", 4)
    other = tmp_path / "other.npz"
    capture_run(model, tok, texts[:n], other, condition="bf16", **kw)
    with pytest.raises(InputError, match=message) as exc:
        compare_captures(base, other)
    assert "\n" not in str(exc.value)


def test_other_shapes_are_refused(qwen, base, tmp_path):
    """Same site names, another intermediate size: the shape of the MLP's sites differs."""
    import torch
    from transformers import AutoModelForCausalLM

    model, tok, texts = qwen
    cfg = model.config.to_dict()
    cfg["intermediate_size"] = 96
    config = type(model.config).from_dict(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        other_model = AutoModelForCausalLM.from_config(config).eval()
    capture_run(other_model, tok, texts[:4], tmp_path / "o.npz", batch_size=4, subset_size=64,
                projection_dim=32)
    with pytest.raises(InputError, match=r"the shape of site 'model.layers.0.mlp.gate_proj': "
                                         r"192 against 96 features"):
        compare_captures(base, tmp_path / "o.npz")


def test_damaged_and_truncated_files_are_refused(base, tmp_path):
    data = base.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"`reference`: .*cut.npz' is not a complete capture "
                                         r"file \(damaged or truncated"):
        compare_captures(cut, base)
    # one byte of an array changed: the zip's CRC or the header's SHA-256 catches it
    flipped = tmp_path / "flipped.npz"
    with zipfile.ZipFile(base) as z:
        info = z.getinfo("chunk-00000/sketch.npy")
    raw = bytearray(data)
    offset = info.header_offset + 30 + len(info.filename) + len(info.extra) + 40
    raw[offset] ^= 0xFF
    flipped.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"`candidate`: .*flipped.npz' is damaged: "
                                         r"'chunk-00000/sketch.npy'"):
        compare_captures(base, flipped)
    # a zip that is not a capture, a header of another version, a file that is not a zip
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(InputError, match=r"lacks 'header.json' \(not a capture"):
        compare_captures(other, base)
    newer = tmp_path / "newer.npz"
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(newer, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            if item.filename == "header.json":
                header = json.loads(body)
                header["format_version"] = 99
                body = json.dumps(header).encode()
            dst.writestr(item.filename, body)
    with pytest.raises(InputError, match=r"has format_version 99; this package reads 1"):
        compare_captures(base, newer)
    text = tmp_path / "text.npz"
    text.write_text("not a capture")
    with pytest.raises(InputError, match=r"is not a complete capture file"):
        compare_captures(base, text)
    with pytest.raises(InputError, match=r"`reference`: capture file .* does not exist"):
        compare_captures(tmp_path / "none.npz", base)


def test_capture_inputs_are_checked(qwen, tmp_path):
    model, tok, texts = qwen
    with pytest.raises(InputError, match=r"`subset_size` must be an integer in "
                                         r"\[2, 1048576\], got 1"):
        capture_run(model, tok, texts[:2], tmp_path / "x.npz", subset_size=1)
    with pytest.raises(InputError, match=r"`path`: the directory of .* does not exist"):
        capture_run(model, tok, texts[:2], tmp_path / "no" / "x.npz")
    with pytest.raises(InputError, match=r"`condition.checkpoint`: a capture runs the model"):
        capture_run(model, tok, texts[:2], tmp_path / "x.npz",
                    condition={"checkpoint": "somewhere"})
    assert not list(tmp_path.iterdir())  # nothing written, not even a partial file


def test_captures_with_other_batch_sizes_align_item_by_item(qwen, tmp_path):
    """Chunks of 3 against chunks of 4: every item is compared with itself (the same fp32
    run differs only by the rounding of other batch shapes, far below any real divergence)."""
    model, tok, texts = qwen
    capture_run(model, tok, texts[:7], tmp_path / "b3.npz", batch_size=3, subset_size=64,
                projection_dim=32)
    capture_run(model, tok, texts[:7], tmp_path / "b4.npz", batch_size=4, subset_size=64,
                projection_dim=32)
    div = compare_captures(tmp_path / "b3.npz", tmp_path / "b4.npz")
    assert len(div.items) == 7 * div.modules.shape[0]
    assert div.items["rel_rms"].max() < 1e-5 and div.items["cosine"].min() > 1 - 1e-9
    assert div.settings["batch_size"] == "3 and 4"
    with CaptureReader(tmp_path / "b3.npz") as r:
        assert [(c["start"], c["stop"]) for c in r.header["chunks"]] == [(0, 3), (3, 6), (6, 7)]


def test_an_interrupted_capture_leaves_no_file(qwen, tmp_path):
    model, tok, texts = qwen

    def stop(_n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        capture_run(model, tok, texts[:4], tmp_path / "x.npz", batch_size=2, progress=stop)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_other_architectures_capture_and_compare(arch, tmp_path):
    model, tok, texts = tiny(arch, n_layers=2)
    capture_run(model, tok, texts[:4], tmp_path / "a.npz", subset_size=256, projection_dim=64)
    capture_run(model, tok, texts[:4], tmp_path / "b.npz", condition="nvfp4_weights",
                subset_size=256, projection_dim=64)
    cap = compare_captures(tmp_path / "a.npz", tmp_path / "b.npz")
    inproc = compare_runs(model, tok, texts[:4], candidate="nvfp4_weights", local=False)
    t = cap.modules.merge(inproc.modules, on=["mode", "site"], suffixes=("", "_x"))
    assert len(t) == len(inproc.modules)
    assert ((t["rel_rms"] - t["rel_rms_x"]).abs() <= 4 * t["rel_rms_sketch_se"] + 1e-15).all()
    assert (cap.injections["injections"] > 0).sum() == 1  # the candidate's one batch


def _with_header(src: Path, dst: Path, edit) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            body = zin.read(item.filename)
            if item.filename == "header.json":
                header = json.loads(body)
                edit(header)
                body = json.dumps(header).encode()
            zout.writestr(item.filename, body)


@pytest.mark.slow
def test_any_malformed_header_is_one_input_error(qwen, tmp_path):
    """Every header entry replaced by a value of another type: the comparison either works
    (the entry is informative only) or fails with one InputError line."""
    model, tok, texts = qwen
    base = tmp_path / "small.npz"
    capture_run(model, tok, texts[:2], base, modules=["residual"], subset_size=16,
                projection_dim=8)
    header = CaptureReader(base).header
    paths = [(k,) for k in header] + [(k, sub) for k, v in header.items()
                                      if isinstance(v, dict) for sub in v]
    paths += [("sites", 0, key) for key in header["sites"][0]]
    paths += [("chunks", 0, key) for key in header["chunks"][0]]
    refused = 0
    for path in paths:
        for value in (None, "x", -1):
            def edit(h, path=path, value=value):
                target = h
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value

            bad = tmp_path / "bad.npz"
            _with_header(base, bad, edit)
            try:
                div = compare_captures(base, bad)
            except InputError as exc:
                assert "\n" not in str(exc) and str(exc).startswith("`candidate`: ")
                refused += 1
            else:
                assert len(div.items) > 0
    assert refused > 25


def test_a_divergence_of_1e_7_is_resolved(tmp_path):
    """fp64 against fp32: rel RMS ~4e-7, far below float32's resolution of a sketch; the
    float64 sketches and the fp64 run's float64 subset still estimate it within its SE."""
    model, tok, texts = tiny("qwen2", n_layers=2)
    for cond in ("fp64", "fp32"):
        capture_run(model, tok, texts[:4], tmp_path / f"{cond}.npz", condition=cond,
                    subset_size=256, projection_dim=64)
    assert CaptureReader(tmp_path / "fp64.npz").chunk(0)["subset"].dtype == np.float64
    cap = compare_captures(tmp_path / "fp64.npz", tmp_path / "fp32.npz")
    inproc = compare_runs(model, tok, texts[:4], reference="fp64", candidate="fp32",
                          local=False)
    m = cap.items.merge(inproc.items, on=["mode", "site", "item_id"], suffixes=("", "_x"))
    m = m[m["rel_rms_x"] > 0]
    assert m["rel_rms_x"].median() < 1e-6
    for metric in ("rel_rms", "mape"):
        z = (m[metric] - m[f"{metric}_x"]) / m[f"{metric}_se"]
        assert 0.6 < z.std() < 1.5, (metric, z.std())
