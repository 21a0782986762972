from __future__ import annotations

import json

import pytest

from robuststats.engine import NoiseSpec
from robuststats.errors import InputError


def test_defaults_and_derived_views() -> None:
    spec = NoiseSpec(scale=0.05)
    assert spec.kind == "relative_gaussian"
    assert spec.phase_scales == {"forward": 0.05, "backward": 0.0}
    assert spec.op_set == ("linear", "matmul", "bmm", "attention_scores", "attention_output")
    assert spec.layer_indices is None


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        ("forward", {"forward": 0.1, "backward": 0.0}),
        ("backward", {"forward": 0.0, "backward": 0.1}),
        ("both", {"forward": 0.1, "backward": 0.1}),
    ],
)
def test_named_phases(phases: str, expected: dict[str, float]) -> None:
    assert NoiseSpec(scale=0.1, phases=phases).phase_scales == expected


def test_phase_mapping_sets_scale_and_replace_keeps_ratio() -> None:
    spec = NoiseSpec(phases={"forward": 0.05, "backward": 0.02})
    assert spec.scale == 0.05
    assert spec.phase_scales == {"forward": 0.05, "backward": 0.02}
    doubled = spec.replace(scale=0.1)
    assert doubled.phase_scales == pytest.approx({"forward": 0.1, "backward": 0.04})
    with pytest.raises(InputError, match="conflicts with the per-phase scales"):
        NoiseSpec(scale=0.3, phases={"forward": 0.05})


@pytest.mark.parametrize(
    ("layers", "indices"),
    [
        (2, (2,)),
        ([3, 0, 3], (0, 3)),
        ("3-5", (3, 4, 5)),
        ("0,2,7-8", (0, 2, 7, 8)),
        ({"window": 3, "start": 4}, (4, 5, 6)),
        ({"window": 2}, (0, 1)),
    ],
)
def test_layer_forms(layers: object, indices: tuple[int, ...]) -> None:
    assert NoiseSpec(scale=0.1, layers=layers).layer_indices == indices


def test_round_trip_dict_json_yaml(tmp_path) -> None:
    spec = NoiseSpec(
        scale=0.05, kind="fp8_e4m3", phases="both", ops=["softmax", "linear"],
        layers="1-2", layer_scales={"1": 0.5, "model.layers.2.mlp": 2.0}, seed=7,
    )
    assert spec.ops == ("linear", "softmax")  # canonical order
    assert spec.layer_scales == {1: 0.5, "model.layers.2.mlp": 2.0}
    assert NoiseSpec.from_dict(spec.to_dict()) == spec
    j = tmp_path / "s.json"
    j.write_text(json.dumps(spec.to_dict()))
    assert NoiseSpec.from_file(j) == spec
    y = tmp_path / "s.yaml"
    y.write_text("scale: 0.05\nkind: fp8_e4m3\nphases: both\nops: [linear, softmax]\n"
                 "layers: 1-2\nlayer_scales: {1: 0.5, model.layers.2.mlp: 2.0}\nseed: 7\n")
    assert NoiseSpec.from_file(y) == spec


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scale": -0.1}, r"`scale` must be a non-negative number, got -0\.1"),
        ({"scale": None}, r"`scale` is required"),
        ({"scale": 0.1, "ops": ["softmx"]}, r"unknown op 'softmx' \(did you mean 'softmax'\?\); known ops"),
        ({"scale": 0.1, "ops": "matmul_onyl"}, r"got 'matmul_onyl' \(did you mean 'matmul_only'\?\)\.$"),
        ({"scale": 0.1, "kind": "relative_gauss"}, r"`kind` must be one of 'relative_gaussian', .*, got 'relative_gauss' \(did you mean 'relative_gaussian'\?\)\.$"),
        ({"scale": 0.1, "phases": "forwards"}, r"got 'forwards' \(did you mean 'forward'\?\)\.$"),
        ({"scale": 0.1, "phases": {"fwd": 0.1}}, r"mapping keys must be 'forward' or 'backward'"),
        ({"scale": 0.1, "layers": "5-3"}, r"range '5-3' is empty"),
        ({"scale": 0.1, "layers": [-1]}, r"non-negative layer indices, got -1"),
        ({"scale": 0.1, "layers": {"window": 0}}, r"`layers.window` must be a positive integer"),
        ({"scale": 0.1, "layer_scales": {"2": -1.0}}, r"`layer_scales\[2\]` must be a non-negative"),
        ({"scale": 0.1, "seed": -3}, r"`seed` must be a non-negative integer, got -3"),
    ],
)
def test_bad_specs(kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        NoiseSpec(**kwargs)


def test_unknown_keys_and_files(tmp_path) -> None:
    with pytest.raises(InputError, match=r"noise spec: unknown key 'scal' \(did you mean 'scale'\?\); allowed keys: 'scale', "):
        NoiseSpec.from_dict({"scal": 0.1})
    with pytest.raises(InputError, match="does not exist"):
        NoiseSpec.from_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        NoiseSpec.from_file(bad)
    with pytest.raises(InputError, match="NoiseSpec has no field 'sed'"):
        NoiseSpec(scale=0.1).replace(sed=1)


def test_spec_is_immutable() -> None:
    spec = NoiseSpec(scale=0.1)
    with pytest.raises(AttributeError):
        spec.scale = 0.2  # type: ignore[misc]


def test_specs_are_hashable() -> None:
    a = NoiseSpec(scale=0.1, layer_scales={"1": 0.5, "model.norm": 2.0}, phases={"forward": 0.1})
    b = NoiseSpec.from_dict(a.to_dict())
    assert hash(a) == hash(b) and len({a, b, NoiseSpec(scale=0.1)}) == 2


def test_noise_spec_pickles_and_needs_no_torch() -> None:
    import pickle
    import subprocess
    import sys

    spec = NoiseSpec(phases={"forward": 0.05, "backward": 0.01}, ops=["linear"], layers="0-2",
                     layer_scales={1: 0.5}, seed=3)
    assert pickle.loads(pickle.dumps(spec)) == spec
    code = ("import sys\n"
            "import robuststats.engine as engine\n"
            "from robuststats.engine import KINDS, NoiseSpec, spec_from_env\n"
            "NoiseSpec.from_dict({'scale': 0.1, 'kind': KINDS[1], 'phases': 'both'})\n"
            "spec_from_env({'ROBUSTSTATS_NOISE': '{\"scale\": 0.1}'})\n"
            "assert 'torch' not in sys.modules, 'torch imported by NoiseSpec'\n"
            "engine.inject\n"
            "assert 'torch' in sys.modules\n"
            "print(set(engine.__all__) <= set(dir(engine)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_engine_unknown_attribute() -> None:
    import robuststats.engine as engine

    with pytest.raises(AttributeError, match="has no attribute 'NoiseSpek'"):
        engine.NoiseSpek  # noqa: B018
