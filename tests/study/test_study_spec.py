from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from robuststats.errors import InputError
from robuststats.runs.spec import StudySpec

ROOT = Path(__file__).resolve().parents[2]

GOOD = textwrap.dedent("""\
    name: tiny
    version: 1
    task:
      name: arithmetic
      params: {seed: 0}
    conditions:
      A:
        train_noise: null
      B:
        train_noise: {scale: 0.05, phases: forward}
    evaluation:
      noise_levels: [0.1, 0, 0.05]
      noise_seeds: 3
    seeds: [4, 7, 9]
    hypotheses:
      - id: H1
        metric: retention
        a: B
        b: A
        eval_noise: 0.05
        relation: greater
        margin: 0
    analysis:
      multiplicity: fdr_bh
    """)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_good_file_resolves(tmp_path: Path) -> None:
    spec = StudySpec.from_file(write(tmp_path, GOOD))
    assert spec.evaluation.noise_levels == [0.0, 0.05, 0.1]  # sorted
    assert spec.seed_list() == [4, 7, 9]
    assert spec.evaluation.noise_seed_list() == [0, 1, 2]
    assert spec.trainer.name == "builtin"
    assert spec.analysis.multiplicity == "fdr_bh"
    assert spec.analysis.n_resamples == 2000


def test_hash_ignores_key_order_but_not_values(tmp_path: Path) -> None:
    a = StudySpec.from_file(write(tmp_path, GOOD))
    reordered = GOOD.replace("seeds: [4, 7, 9]\n", "").replace(
        "name: tiny\n", "seeds: [4, 7, 9]\nname: tiny\n")
    b = StudySpec.from_file(write(tmp_path, reordered))
    assert a.spec_hash() == b.spec_hash()
    c = StudySpec.from_file(write(tmp_path, GOOD.replace("noise_seeds: 3", "noise_seeds: 2")))
    assert c.spec_hash() != a.spec_hash()
    # a count and the equivalent explicit list resolve to the same spec
    d = StudySpec.from_file(write(tmp_path, GOOD.replace("noise_seeds: 3", "noise_seeds: [0, 1, 2]")))
    assert d.spec_hash() == a.spec_hash()


def test_unknown_key_names_key_line_and_suggestion(tmp_path: Path) -> None:
    text = GOOD.replace("  noise_seeds: 3", "  noise_seed: 3")
    with pytest.raises(InputError, match=r"evaluation\.noise_seed \(line 13\): unknown key; "
                                         r"did you mean 'noise_seeds'\?"):
        StudySpec.from_file(write(tmp_path, text))


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"seedz \(line 1\): unknown key"):
        StudySpec.from_file(write(tmp_path, "seedz: 3\n" + GOOD))


def test_wrong_type_names_key_and_line(tmp_path: Path) -> None:
    text = GOOD.replace("version: 1", "version: one")
    with pytest.raises(InputError, match=r"version \(line 2\): .*integer.*got 'one'"):
        StudySpec.from_file(write(tmp_path, text))


def test_impossible_value_names_key_and_line(tmp_path: Path) -> None:
    text = GOOD.replace("[0.1, 0, 0.05]", "[0.1, 0, 1.5]")
    with pytest.raises(InputError, match=r"evaluation\.noise_levels \(line 12\): each noise "
                                         r"level must lie in \[0, 1\), got 1.5"):
        StudySpec.from_file(write(tmp_path, text))


def test_negative_seed_count(tmp_path: Path) -> None:
    text = GOOD.replace("seeds: [4, 7, 9]", "seeds: 0")
    with pytest.raises(InputError, match=r"seeds \(line 14\): .*count must be >= 1, got 0"):
        StudySpec.from_file(write(tmp_path, text))


def test_hypothesis_unknown_condition(tmp_path: Path) -> None:
    text = GOOD.replace("    b: A\n", "    b: Z\n")
    with pytest.raises(InputError, match=r"hypotheses\.0\.b \(line 19\): unknown condition 'Z'"):
        StudySpec.from_file(write(tmp_path, text))


def test_hypothesis_level_not_evaluated(tmp_path: Path) -> None:
    text = GOOD.replace("    eval_noise: 0.05\n", "    eval_noise: 0.2\n")
    with pytest.raises(InputError, match=r"hypotheses\.0\.eval_noise \(line 20\): 0.2 is not one"):
        StudySpec.from_file(write(tmp_path, text))


def test_hypothesis_missing_key(tmp_path: Path) -> None:
    text = GOOD.replace("    relation: greater\n", "")
    with pytest.raises(InputError, match=r"hypotheses\.0 \(line 16\): missing required key "
                                         r"'relation'"):
        StudySpec.from_file(write(tmp_path, text))


def test_multiplicity_must_be_named_method(tmp_path: Path) -> None:
    text = GOOD.replace("multiplicity: fdr_bh", "multiplicity: sidak-ish")
    with pytest.raises(InputError, match=r"analysis\.multiplicity \(line 24\)"):
        StudySpec.from_file(write(tmp_path, text))


def test_duplicate_key_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"line 2\): duplicate key 'name'"):
        StudySpec.from_file(write(tmp_path, "name: a\nname: b\n"))
    with pytest.raises(InputError, match=r"\(line 2\): invalid YAML"):
        StudySpec.from_file(write(tmp_path, "name: a\n  - b: [\n"))
    with pytest.raises(InputError, match="does not exist"):
        StudySpec.from_file(tmp_path / "nope.yaml")


def test_missing_required_section(tmp_path: Path) -> None:
    text = GOOD.replace("task:\n  name: arithmetic\n  params: {seed: 0}\n", "")
    with pytest.raises(InputError, match=r"task: required key is missing"):
        StudySpec.from_file(write(tmp_path, text))


def test_overrides_apply_only_when_given(tmp_path: Path) -> None:
    spec = StudySpec.from_file(write(tmp_path, GOOD))
    assert spec.with_overrides().spec_hash() == spec.spec_hash()
    # listed seeds: --seeds N takes the first N listed
    assert spec.with_overrides(seeds=2).seed_list() == [4, 7]
    with pytest.raises(InputError, match=r"`seeds` asks for 5 seeds but the study file lists "
                                         r"only 3"):
        spec.with_overrides(seeds=5)
    counted = StudySpec.from_file(write(tmp_path, GOOD.replace("seeds: [4, 7, 9]", "seeds: 2")))
    assert counted.with_overrides(seeds=5).seed_list() == [0, 1, 2, 3, 4]
    assert spec.with_overrides(n_items=7).evaluation.n_items == 7
    with pytest.raises(InputError, match=r"`n_items` must be a positive integer, got 0"):
        spec.with_overrides(n_items=0)


def test_shipped_study_files_validate() -> None:
    for name in ("e8_matrix.yaml", "e8_smoke.yaml"):
        spec = StudySpec.from_file(ROOT / "studies" / name)
        assert list(spec.conditions) == ["E8a", "E8b", "E8c", "E8d"]
        assert spec.evaluation.noise_levels == [0.0, 0.05, 0.1]
        assert {h.id for h in spec.hypotheses} >= {"H1", "H2", "H3", "H4", "H5", "H6"}


def test_evaluation_generator_selects_the_stream_and_keeps_default_hashes(tmp_path: Path) -> None:
    base = StudySpec.from_file(write(tmp_path, GOOD))
    mt = StudySpec.from_file(write(tmp_path, GOOD.replace(
        "noise_seeds: 3", "noise_seeds: 3\n  generator: mt")))
    assert mt.spec_hash() == base.spec_hash()  # the default stream, written or not
    assert "generator" not in base.model_dump()["evaluation"]
    philox = StudySpec.from_file(write(tmp_path, GOOD.replace(
        "noise_seeds: 3", "noise_seeds: 3\n  generator: philox")))
    assert philox.spec_hash() != base.spec_hash()
    cell = philox.evaluation.noise(0.05, 1)
    assert cell is not None and cell.generator == "philox" and cell.to_dict()["generator"] == "philox"
    assert base.evaluation.noise(0.05, 1).generator == "mt"
    assert philox.evaluation.noise(0.0, 0) is None
    with pytest.raises(InputError, match=r"evaluation\.generator \(line 14\).*`generator` must be "
                                         r"one of 'mt', 'philox', got 'pcg'"):
        StudySpec.from_file(write(tmp_path, GOOD.replace(
            "noise_seeds: 3", "noise_seeds: 3\n  generator: pcg")))


def test_a_stream_that_cannot_build_is_refused_before_any_cell(tmp_path: Path, monkeypatch) -> None:
    from robuststats.engine import _philox
    from robuststats.runs import preflight

    class NoCompiler(_philox._Kernel):
        def build(self):
            raise RuntimeError("c++: not found")

    monkeypatch.setattr(_philox, "_KERNEL", NoCompiler())
    text = GOOD.replace("train_noise: {scale: 0.05, phases: forward}",
                        "train_noise: {scale: 0.05, phases: forward, generator: philox}")
    with pytest.raises(InputError, match=r"conditions\.B\.train_noise\.generator \(line 10\): "
                                         r"generator 'philox' needs its C kernel.*not found"):
        preflight(StudySpec.from_file(write(tmp_path, text)))
    preflight(StudySpec.from_file(write(tmp_path, GOOD)))  # the default stream needs no build
