"""msprobe dumps as the two runs of a divergence, on dumps msprobe itself writes: tensor and
statistics modes, identical runs, the statistics' bound on rel RMS, refused pairs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from divergence_models import make_dumps

pytest.importorskip("msprobe")

from robuststats.cli import main
from robuststats.divergence import compare_dumps, is_dump, read_dump
from robuststats.errors import InputError

pytestmark = pytest.mark.slow  # each dump is a process that imports msprobe (~8 s)

DUMPS = {  # name: flags of msprobe_dump.py
    "t32": ["--task", "tensor"],
    "t16": ["--task", "tensor", "--dtype", "bfloat16"],
    "s32": ["--task", "statistics", "--passes", "3"],
    "s16": ["--task", "statistics", "--dtype", "bfloat16", "--passes", "3"],
    "s_items": ["--task", "statistics", "--items-seed", "1", "--passes", "3"],
    "s_model": ["--task", "statistics", "--layers", "3", "--passes", "3"],
}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    return make_dumps(tmp_path_factory.mktemp("msprobe"), DUMPS)


def test_tensor_dumps_identical_runs_give_zero_and_bf16_its_rounding(dumps):
    same = compare_dumps(dumps["t32"], dumps["t32"])
    assert same.n_items == 6 and len(same.items) > 0
    assert (same.items["rel_rms"] == 0).all() and (same.items["cosine"] == 1).all()
    div = compare_dumps(dumps["t32"], dumps["t16"])
    res = div.depth.set_index("layer")
    # bf16 keeps 8 significant bits: a unit roundoff of 2^-9 = 0.00195 per operation
    assert 5e-4 < res.loc[0, "rel_rms"] < 2e-2, res
    assert res.loc[0, "rel_rms_ci_low"] < res.loc[0, "rel_rms"] < res.loc[0, "rel_rms_ci_high"]
    sites = set(div.modules["site"])
    assert {"model.layers.0", "model.layers.1.mlp.down_proj", "lm_head"} <= sites
    row = div.modules.set_index("site").loc["model.layers.1.mlp.down_proj"]
    assert row["layer"] == 1 and row["module_type"] == "mlp.down_proj"
    assert row["n_items"] == 6


def test_tensor_metrics_are_those_of_the_dumped_tensors(dumps):
    """One site by hand: the dumped output tensors, loaded with torch, row by row."""
    import torch

    from robuststats.divergence import item_metrics

    div = compare_dumps(dumps["t32"], dumps["t16"])
    site = "model.layers.0.self_attn.v_proj"
    tensors = []
    for key in ("t32", "t16"):
        d = read_dump(dumps[key])
        call = next(c for c in d.calls if c.site == site)
        tensors.append(torch.load(d.tensor_dir / call.output["data_name"], weights_only=True))
    want = item_metrics(*tensors)["rel_rms"].numpy()
    got = div.items[div.items["site"] == site].sort_values("item_id")["rel_rms"].to_numpy()
    assert np.allclose(got, want, rtol=0, atol=0)


def test_statistics_dumps_bound_rel_rms_and_intervals_are_over_calls(dumps):
    div = compare_dumps(dumps["s32"], dumps["s16"])
    assert div.settings["dumps"]["reference"]["task"] == "statistics"
    table = div.modules.set_index("site")
    assert (table["n_items"] == 3).all()  # three forward passes: three calls per module
    assert table["rel_rms"].isna().all()
    row = table.loc["model.layers.1"]
    assert row["norm_rel_diff_ci_low"] <= row["norm_rel_diff"] <= row["norm_rel_diff_ci_high"]
    # |‖b‖ − ‖a‖| / ‖a‖ ≤ ‖b − a‖ / ‖a‖: the first call's statistics against the tensor
    # dump of the same batch (same seeds), over its whole output, up to the rounding of the
    # statistic itself: msprobe computes a bf16 tensor's Norm in bf16 (unit roundoff 2^-8)
    assert any("bfloat16 numbers" in n for n in div.notes)
    tens = compare_dumps(dumps["t32"], dumps["t16"]).items
    first = div.items[div.items["item_id"] == "call0"].set_index("site")
    checked = 0
    for site, g in tens.groupby("site"):
        whole = math.sqrt((g["err_norm"] ** 2).sum() / (g["ref_norm"] ** 2).sum())
        assert first.loc[site, "norm_rel_diff"] <= whole + 2 ** -8 * (1 + whole), site
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("other, message", [
    ("s_items", r"`candidate`: the dumps differ in their items: the token ids given to "
                r"'Module.model.embed_tokens.Embedding.forward.0' differ"),
    ("s_model", r"`candidate`: the dumps differ in their layer count: 2 against 3 "
                r"\(another model\)"),
    ("t32", r"`candidate`: the dumps differ in their task: 'statistics' against 'tensor'"),
])
def test_mismatched_dumps_are_refused_naming_the_difference(dumps, other, message):
    with pytest.raises(InputError, match=message):
        compare_dumps(dumps["s32"], dumps[other])


def test_another_step_truncated_json_and_missing_tensor_are_refused(dumps, tmp_path, capsys):
    moved = tmp_path / "later"
    src = next(dumps["s16"].glob("step0/*"))
    shutil.copytree(src, moved / "step1" / src.name)
    with pytest.raises(InputError, match=r"the dumps differ in their step: 0 against 1"):
        compare_dumps(dumps["s32"], moved)
    cut = tmp_path / "cut"
    shutil.copytree(src, cut)
    text = (cut / "dump.json").read_text()
    (cut / "dump.json").write_text(text[:len(text) // 2])
    assert is_dump(cut)
    code = main(["divergence", str(dumps["s32"]), "--candidate", str(cut), "--no-progress",
                 "--out", str(tmp_path / "res")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--candidate" in err and "is not complete JSON (truncated or damaged" in err
    gone = tmp_path / "gone"
    shutil.copytree(next(dumps["t16"].glob("step0/*")), gone)
    victim = next((gone / "dump_tensor_data").glob("*layers.1.mlp.down_proj*output*"))
    victim.unlink()
    with pytest.raises(InputError, match=r"tensor file '.*down_proj.*' of .* is missing"):
        compare_dumps(dumps["t32"], gone)
    assert not (tmp_path / "res").exists()


def test_cli_compares_two_dumps_into_a_version(dumps, tmp_path, capsys):
    out = tmp_path / "res"
    code = main(["divergence", str(dumps["t32"]), "--candidate", str(dumps["t16"]),
                 "--out", str(out), "--format", "json", "--no-progress"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_items"] == 6 and len(data["depth"]) == 2
    version = Path(data["path"])
    assert (version / "report.md").is_file() and (version / "modules.csv").is_file()
    code = main(["divergence", str(dumps["t32"]), "--candidate", str(dumps["t16"]),
                 "--items", "3", "--no-progress"])
    assert code == 2
    assert "`--items`: SOURCE is an msprobe dump" in capsys.readouterr().err
