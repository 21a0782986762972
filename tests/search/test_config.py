"""The output config: NoiseSpec.from_file loads it (provenance ignored) and inject applies
exactly its per-layer scales."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robuststats.engine import NoiseSpec
from robuststats.errors import InputError


def _doc() -> dict:
    spec = NoiseSpec(scale=0.05, ops="matmul_only", layer_scales={0: 2.5, 1: 0.4})
    return {**spec.to_dict(), "provenance": {"study": "s", "trial": 3,
                                             "reevaluation": {"accuracy": {"ci_low": 0.1}}}}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_from_file_ignores_provenance(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"c{suffix}"
    doc = _doc()
    path.write_text(yaml.safe_dump(doc) if suffix == ".yaml" else json.dumps(doc))
    spec = NoiseSpec.from_file(path)
    assert spec.layer_scales == {0: 2.5, 1: 0.4}
    assert spec == NoiseSpec.from_dict({k: v for k, v in doc.items() if k != "provenance"})


def test_provenance_must_be_a_mapping_and_other_keys_stay_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**_doc(), "provenance": [1]}))
    with pytest.raises(InputError, match="`provenance` must be a mapping"):
        NoiseSpec.from_file(path)
    path.write_text(json.dumps({**_doc(), "provenence": {}}))
    with pytest.raises(InputError, match="provenence"):
        NoiseSpec.from_file(path)


def test_written_config_round_trips_and_inject_applies_its_scales(tmp_path: Path) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from robuststats.engine import inject
    from robuststats.search._space import discover_space

    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2)
    with torch.random.fork_rng():  # a fixed model without touching the caller's stream
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config).eval()
    for space_kind, params in (("layer", {"layer_0": 2.0, "layer_1": 0.5, "layer_2": 1.0}),
                               ("block", None)):
        space = discover_space(model, NoiseSpec(scale=0.1).op_set, space_kind, 0.25, 4.0)
        if params is None:
            assert [p.param for p in space.places][:2] == ["layer_0.self_attn", "layer_0.mlp"]
            params = {p: 0.25 + 0.5 * i for i, p in enumerate(space.params)}
        spec = space.noise(NoiseSpec(scale=0.1, ops="matmul_only"), params)
        path = tmp_path / f"{space_kind}.yaml"
        path.write_text(yaml.safe_dump({**spec.to_dict(), "provenance": {"trial": 1}}))
        loaded = NoiseSpec.from_file(path)
        assert loaded == spec
        batch = torch.randint(0, 64, (4, 48), generator=torch.Generator().manual_seed(0))
        with torch.no_grad(), inject(model, loaded) as session:
            model(input_ids=batch)
        # realised relative error (RMS) of each op is its scale: 0.1 × the multiplier
        stats = session.stats
        inside = stats[stats["layer"] >= 0].set_index(["layer", "op"])["rms_noise_ratio"]
        for place in space.places:
            ops = ["linear", "attention_scores", "attention_output"]
            if place.param.endswith(".self_attn"):
                ops = ["attention_scores", "attention_output"]  # linear mixes attn and mlp
            elif place.param.endswith(".mlp"):
                continue  # reached only through linear, checked below
            for op in ops:
                assert inside[(place.layer, op)] == pytest.approx(0.1 * params[place.param],
                                                                  rel=0.15)
        if space_kind == "block":
            lo, hi = sorted((params["layer_0.self_attn"], params["layer_0.mlp"]))
            assert 0.1 * lo < inside[(0, "linear")] < 0.1 * hi
        # outside the decoder layers (lm_head): the base scale
        assert stats[stats["layer"] == -1]["rms_noise_ratio"].to_numpy() == \
            pytest.approx(0.1, rel=0.15)
