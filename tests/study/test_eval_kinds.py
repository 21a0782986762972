"""`evaluation.kind` and a condition's `eval_kind`: every engine error model, input quantization
and static weight noise, from the study file to the cells and the evaluator."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from robuststats.engine import KINDS, NoiseSpec
from robuststats.engine.eval_kinds import EVALUATION_KINDS, evaluation_noise
from robuststats.errors import InputError
from robuststats.runs.plan import plan
from robuststats.runs.spec import StudySpec

ROOT = Path(__file__).resolve().parents[2]

STUDY = textwrap.dedent("""\
    name: kinds
    version: 1
    task:
      name: arithmetic
      params: {seed: 0}
    conditions:
      A:
        train_noise: null
      Q:
        train_noise: null
        eval_kind: nvfp4_weights
    evaluation:
      noise_levels: [0, 0.05]
      kind: relative_gaussian
      noise_seeds: 3
    seeds: 2
    """)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_registry_covers_every_engine_kind_and_builds_valid_specs() -> None:
    assert set(KINDS) <= set(EVALUATION_KINDS)
    for name, entry in EVALUATION_KINDS.items():
        spec = evaluation_noise(name, "matmul_only", 0.05, 7)
        assert isinstance(spec, NoiseSpec) and spec.seed == 7 and spec.phases == "forward"
        assert spec.scale == (0.05 if entry.level_is_scale else 1.0)
        assert evaluation_noise(name, "matmul_only", 0.0, 7) is None
    assert evaluation_noise("nvfp4_weights", "matmul_only", 0.05, 0) == NoiseSpec(
        scale=1.0, kind="nvfp4", target="weights", ops="linear", layer_scales={"lm_head": 0})


def test_condition_eval_kind_reaches_the_cells(tmp_path: Path) -> None:
    spec = StudySpec.from_file(write(tmp_path, STUDY))
    assert spec.cell_noise("A", 0.05, 2) == NoiseSpec(scale=0.05, phases="forward", seed=2)
    assert spec.cell_noise("Q", 0.05, 2).kind == "nvfp4"
    assert spec.cell_noise("Q", 0.0, 0) is None
    cells = plan(spec)
    # NVFP4 is deterministic: one noise seed per noisy cell; the Gaussian gets three
    assert sorted(c.noise_seed for c in cells if c.condition == "Q" and c.eval_noise) == [0, 0]
    assert sorted(c.noise_seed for c in cells if c.condition == "A" and c.eval_noise) == [0, 0, 1,
                                                                                       1, 2, 2]


def test_evaluation_kind_accepts_operand_kinds_with_one_level(tmp_path: Path) -> None:
    text = STUDY.replace("kind: relative_gaussian", "kind: fp8_e4m3_inputs")
    spec = StudySpec.from_file(write(tmp_path, text))
    assert spec.cell_noise("A", 0.05, 0).target == "inputs"
    with pytest.raises(InputError, match=r"evaluation\.noise_levels \(line \d+\): kind "
                                         r"'fp8_e4m3_inputs' is a number format"):
        StudySpec.from_file(write(tmp_path, text.replace("[0, 0.05]", "[0, 0.05, 0.1]")))
    # engine output kinds keep their scale semantics at several levels
    StudySpec.from_file(write(tmp_path, STUDY.replace("[0, 0.05]", "[0, 0.05, 0.1]")))


def test_unknown_kinds_name_the_key_and_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"evaluation\.kind \(line 14\): `kind` must be one of "
                                         r".*'nvfp4_weights'.*got 'nvfp4_weight' \(did you mean "
                                         r"'nvfp4_weights'\?\)"):
        StudySpec.from_file(write(tmp_path, STUDY.replace("kind: relative_gaussian",
                                                          "kind: nvfp4_weight")))
    with pytest.raises(InputError, match=r"conditions\.Q\.eval_kind \(line 11\): must be one of "
                                         r".*\(did you mean 'static_relative_gaussian'\?\), "
                                         r"got 'static_relative_gausian'\.$"):
        StudySpec.from_file(write(tmp_path, STUDY.replace("eval_kind: nvfp4_weights",
                                                          "eval_kind: static_relative_gausian")))


def test_seed002_study_file_validates() -> None:
    spec = StudySpec.from_file(ROOT / "studies" / "seed002_nvfp4.yaml")
    assert {spec.eval_kind(c) for c in spec.conditions} == {
        "relative_gaussian", "static_relative_gaussian", "nvfp4_weights"}
    assert spec.cell_noise("nvfp4", 0.05, 0).kind == "nvfp4"
    assert {h.id for h in spec.hypotheses} == {"H1", "H2", "H3", "H4"}


def test_evaluate_under_operand_kinds_injects_and_is_verified() -> None:
    torch = pytest.importorskip("torch")
    from robuststats.models.evaluate import evaluate
    from robuststats.models.tasks import get_task
    from robuststats.models.trainer import TrainingCondition, get_trainer

    task = get_task("arithmetic", n_items=16, n_train=200, n_steps=2, max_value=5, seed=1)
    trained = get_trainer("builtin", steps=20, batch_size=16, train_eval_items=0).train(
        task, TrainingCondition("A"), seed=0)
    before = {k: v.clone() for k, v in trained.model.state_dict().items()}
    for kind in ["nvfp4_weights", "static_relative_gaussian", "int8_inputs"]:
        noise = evaluation_noise(kind, "matmul_only", 0.05, 1)
        df = evaluate(trained, task, noise=noise, noise_seed=1, batch_size=16)
        assert df.attrs["injections"] > 0, kind
        layers = {r["layer"] for r in df.attrs["injection_stats"]}
        assert -1 not in layers or kind == "static_relative_gaussian"  # lm_head kept
    assert all(torch.equal(v, before[k]) for k, v in trained.model.state_dict().items())
