"""msprobe dumps of two software stacks: a tiny Llama with sdpa against eager attention,
dumped by msprobe itself at levels L0, L1 and mix. Calls both dumps hold are compared, the
others listed per side; L1 API calls are placed in their decoder layer; refusals are one line,
exit 2, before any compute."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from divergence_models import make_dumps

pytest.importorskip("msprobe")

from robuststats.cli import main
from robuststats.divergence import compare_dumps
from robuststats.errors import InputError

pytestmark = pytest.mark.slow  # each dump is a process that imports msprobe (~8 s)

_LLAMA = ["--model", "llama", "--dtype", "bfloat16"]
DUMPS = {  # name: flags of msprobe_dump.py
    **{f"{lv}_{attn}": [*_LLAMA, "--task", "tensor", "--level", lv, "--attn", attn]
       for lv in ("L0", "L1", "mix") for attn in ("sdpa", "eager")},
    **{f"deep_{attn}": [*_LLAMA, "--task", "statistics", "--level", "L1", "--attn", attn,
                        "--layers", "24", "--passes", "2"] for attn in ("sdpa", "eager")},
    "l1_stats": [*_LLAMA, "--task", "statistics", "--level", "L1", "--passes", "2"],
    "qwen_3passes": ["--task", "statistics", "--level", "L1", "--passes", "3"],
    "qwen_2passes": ["--task", "statistics", "--level", "L1", "--passes", "2", "--attn",
                     "eager"],
    **{f"gpt2_{attn}": ["--model", "gpt2", "--task", "statistics", "--level", "L1",
                        "--layers", "3", "--attn", attn] for attn in ("sdpa", "eager")},
    "narrow": [*_LLAMA, "--task", "statistics", "--steps", "2"],
    "wide": [*_LLAMA, "--task", "statistics", "--hidden", "64"],
    **{f"mlp48_{lv}": [*_LLAMA, "--task", "statistics", "--level", lv, "--intermediate", "48",
                       "--passes", "2"] for lv in ("L0", "L1")},
}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    return make_dumps(tmp_path_factory.mktemp("msprobe_stacks"), DUMPS)


def _rank(dump: Path, step: int = 0) -> Path:
    return next((dump / f"step{step}").glob("*"))


@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
def test_two_stacks_compare_by_the_calls_both_hold(dumps, level):
    div = compare_dumps(dumps[f"{level}_sdpa"], dumps[f"{level}_eager"])
    assert div.n_layers == 2 and list(div.depth["layer"]) == [0, 1]
    assert (div.depth["n_items"] == 6).all() and (div.depth["rel_rms"] > 0).all()
    one = div.one_side
    if level == "L0":  # every module is in both dumps
        assert one.empty
        return
    ref, cand = one[one["side"] == "reference"], one[one["side"] == "candidate"]
    assert set(ref["call"]) == {"Functional.scaled_dot_product_attention"}
    assert sorted(ref["layer"]) == [0, 1]
    for layer in (0, 1):
        calls = cand[cand["layer"] == layer]
        assert {"Torch.matmul", "Functional.softmax", "Functional.dropout"} <= set(calls["call"])
        assert calls["caller"].str.contains("eager_attention_forward").all()
    # sdpa's output is an API call of one side only; the attention module is in both
    assert not any("scaled_dot_product" in s for s in div.modules["site"])
    if level == "mix":
        assert "model.layers.1.self_attn" in set(div.modules["site"])
    assert any("in one dump only" in n for n in div.notes)


def test_l1_layers_are_the_decoder_layers_of_the_l0_dump(dumps):
    """The same runs dumped at L0 and L1: the L1 residual of layer i (the layer's last API
    call, placed by its call stack) is the output of module model.layers.i, item by item, and
    the L1 down projection of layer 1 is model.layers.1.mlp.down_proj."""
    l0 = compare_dumps(dumps["L0_sdpa"], dumps["L0_eager"]).items
    l1 = compare_dumps(dumps["L1_sdpa"], dumps["L1_eager"]).items
    mix = compare_dumps(dumps["mix_sdpa"], dumps["mix_eager"]).items

    def values(items, site):
        rows = items[items["site"] == site].sort_values("item_id")
        assert len(rows) == 6, site
        return rows[["rel_rms", "mape", "cosine"]].to_numpy()

    for layer in (0, 1):
        want = values(l0, f"model.layers.{layer}")
        assert np.array_equal(values(l1, f"layers.{layer}"), want)
        assert np.array_equal(values(mix, f"model.layers.{layer}"), want)
    assert np.array_equal(values(l1, "layers.1.Functional.linear.6"),
                          values(l0, "model.layers.1.mlp.down_proj"))
    assert np.array_equal(values(mix, "model.layers.1.mlp.down_proj.Functional.linear.0"),
                          values(l0, "model.layers.1.mlp.down_proj"))


def test_24_layers_and_module_subsets(dumps, tmp_path, capsys):
    div = compare_dumps(dumps["deep_sdpa"], dumps["deep_eager"])
    assert div.n_layers == 24 and list(div.depth["layer"]) == list(range(24))
    table = div.modules.set_index("site")
    assert (table.loc[[f"layers.{i}" for i in range(24)], "n_items"] == 2).all()  # 2 passes
    # eager attention's calls, in every layer; its mask is built outside them (layer -1)
    assert set(div.one_side["layer"]) == set(range(-1, 24))
    sub = compare_dumps(dumps["deep_sdpa"], dumps["deep_eager"],
                        modules=["layers.0", "layers.23"])
    assert list(sub.depth["layer"]) == [0, 23] and set(sub.modules["site"]) == {
        "layers.0", "layers.23"}
    code = main(["divergence", str(dumps["deep_sdpa"]), "--candidate", str(dumps["deep_eager"]),
                 "--modules", "residual,Functional.linear.6", "--out", str(tmp_path / "res"),
                 "--format", "json", "--no-progress"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    version = Path(data["path"])
    modules = (version / "modules.csv").read_text()
    assert "layers.23.Functional.linear.6" in modules and "Torch.rsqrt" not in modules
    assert "Functional.scaled_dot_product_attention" in (version / "one_side.csv").read_text()
    assert "## Calls in one dump only" in (version / "report.md").read_text()
    code = main(["divergence", str(dumps["deep_sdpa"]), "--candidate", str(dumps["deep_eager"]),
                 "--modules", "layers.30", "--out", str(tmp_path / "res2"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "`--modules`: 'layers.30' matches no" in err
    with pytest.raises(InputError, match=r"the dumps differ in their layer count: 24 against 2"):
        compare_dumps(dumps["deep_sdpa"], dumps["l1_stats"])


def test_l1_layers_of_other_architectures_and_pass_counts(dumps):
    """GPT-2 (Conv1D projections, blocks in ``h``, loop ``block(``) has its 3 layers found;
    a Qwen2 dump with 3 forward passes against one with 2 compares the first 2."""
    div = compare_dumps(dumps["gpt2_sdpa"], dumps["gpt2_eager"])
    assert div.n_layers == 3 and list(div.depth["layer"]) == [0, 1, 2]
    assert sorted(div.one_side.loc[div.one_side["side"] == "reference", "layer"]) == [0, 1, 2]
    div = compare_dumps(dumps["qwen_3passes"], dumps["qwen_2passes"])
    assert div.n_layers == 2 and (div.depth["n_items"] == 2).all()
    assert any("holds 3 forward pass(es), the candidate 2" in n for n in div.notes)
    sdpa = div.one_side[div.one_side["call"] == "Functional.scaled_dot_product_attention"]
    assert list(sdpa["n_calls"]) == [3, 3]  # both layers, every pass


@pytest.mark.parametrize("ref, cand, message", [
    ("narrow", "wide", r"the dumps differ in their hidden size: 32 against 64"),
    ("L0_sdpa", "L1_eager", r"the dumps hold no call in common \(levels L0 and L1"),
    ("l1_stats", "deep_eager", r"their layer count: 2 against 24"),
    # same layers and width, another MLP: a parameter's shape (L0), a linear's weight (L1)
    ("narrow", "mlp48_L0", r"the model: parameter 'weight' of 'model.layers.0.mlp.gate_proj' "
                           r"has shape \[64, 32\] against \[48, 32\]"),
    ("l1_stats", "mlp48_L1", r"the model: the inputs of 'Functional.linear.4.forward' "
                             r"\(layers.0.Functional.linear.4\) have shapes \[\[6, 7, 32\], "
                             r"\[64, 32\]\] against \[\[6, 7, 32\], \[48, 32\]\]"),
])
def test_other_models_and_nothing_in_common_are_refused(dumps, ref, cand, message, capsys,
                                                        tmp_path):
    r = _rank(dumps[ref])
    code = main(["divergence", str(r), "--candidate", str(_rank(dumps[cand])),
                 "--out", str(tmp_path / "res"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "error: `--candidate`" in err, err
    assert re.search(message, err), err
    assert not (tmp_path / "res").exists()


def test_another_step_and_a_dump_cut_mid_write_are_refused_naming_the_file(dumps, tmp_path,
                                                                           capsys):
    def run(ref, cand) -> str:
        code = main(["divergence", str(ref), "--candidate", str(cand), "--out",
                     str(tmp_path / "res"), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err, err
        return err

    # msprobe's own step directories (debugger.step() twice)
    assert "the dumps differ in their step: 0 against 1" in run(
        _rank(dumps["narrow"], 0), _rank(dumps["narrow"], 1))
    assert "holds 2 dumps (step0/" in run(dumps["narrow"], _rank(dumps["narrow"], 1))
    # the stack and construct files beside dump.json, cut in the middle
    for name in ("stack.json", "construct.json"):
        cut = tmp_path / f"cut_{name}"
        shutil.copytree(_rank(dumps["mix_eager"]), cut)
        text = (cut / name).read_text()
        (cut / name).write_text(text[:len(text) // 2])
        err = run(dumps["mix_sdpa"], cut)
        assert f"{cut / name}" in err and "is not complete JSON (truncated" in err
    # a tensor file cut in the middle
    cut = tmp_path / "cut_tensor"
    shutil.copytree(_rank(dumps["L1_eager"]), cut)
    victim = sorted((cut / "dump_tensor_data").glob("Functional.linear.6.forward.output*"))[0]
    data = victim.read_bytes()
    victim.write_bytes(data[:len(data) // 2])
    err = run(dumps["L1_sdpa"], cut)
    assert f"tensor file {victim.name!r}" in err and "cannot be read" in err
    assert not (tmp_path / "res").exists()


def test_fit_flags_are_refused_for_dumps(dumps, capsys):
    for extra, message in ((["--fit-ops", "linear_only"], "`--fit-ops`: applies to "
                            "--fit-noise FILE"),
                           (["--fit-noise", "x.yaml"], "`--fit-noise`: a dump holds no texts")):
        code = main(["divergence", str(dumps["L0_sdpa"]), "--candidate",
                     str(dumps["L0_eager"]), *extra, "--no-progress"])
        assert code == 2 and message in capsys.readouterr().err
