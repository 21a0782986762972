"""Typed study config: engine and statistics objects validated at load, with key and line."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from test_study_spec import GOOD, ROOT, write

from robuststats.engine import AQNSchedule, NoiseSpec
from robuststats.errors import InputError
from robuststats.runs.spec import MULTIPLICITY_CHOICES, StudySpec
from robuststats.stats import Hypothesis
from robuststats.stats._multiplicity import MULTIPLICITY_METHODS

AQN_GOOD = GOOD.replace("  B:\n    train_noise: {scale: 0.05, phases: forward}\n",
                        "  B:\n    train_noise: {scale: 0.05, phases: forward}\n"
                        "    aqn: {sigma_start: 0.02, sigma_end: 0.001}\n")
assert AQN_GOOD != GOOD


def test_conditions_and_hypotheses_are_the_engine_and_stats_classes(tmp_path: Path) -> None:
    spec = StudySpec.from_file(write(tmp_path, AQN_GOOD))
    b = spec.conditions["B"]
    assert b.train_noise == NoiseSpec(scale=0.05, phases="forward")
    assert b.aqn == AQNSchedule(sigma_start=0.02, sigma_end=0.001)
    assert spec.conditions["A"].train_noise is None and spec.conditions["A"].aqn is None
    assert spec.hypotheses == [Hypothesis(id="H1", metric="retention", a="B", b="A",
                                          eval_noise=0.05, relation="greater", margin=0.0)]


@pytest.mark.parametrize("old, new, message", [
    ("{scale: 0.05, phases: forward}", "{scale: -1, phases: forward}",
     r"conditions\.B\.train_noise\.scale \(line 10\): `scale` must be a non-negative number, "
     r"got -1\.0\.$"),
    ("{scale: 0.05, phases: forward}", "{scale: 0.05, phases: sideways}",
     r"conditions\.B\.train_noise\.phases \(line 10\): `phases` must be"),
    ("{scale: 0.05, phases: forward}", "{scale: 0.05, opz: linear}",
     r"conditions\.B\.train_noise\.opz \(line 10\): unknown key 'opz' \(did you mean "
     r"'ops'\?\); allowed keys: 'scale', .*'ties', 'generator'\.$"),
    ("{scale: 0.05, phases: forward}", "{scale: 0.05, ops: [linear, matmull]}",
     r"conditions\.B\.train_noise\.ops \(line 10\): .*unknown op 'matmull'.*'matmul'"),
    ("{scale: 0.05, phases: forward}", "[0.05]",
     r"conditions\.B\.train_noise \(line 10\): noise spec must be a mapping, got list\.$"),
    ("sigma_start: 0.02", "sigma_strat: 0.02",
     r"conditions\.B\.aqn\.sigma_strat \(line 11\): unknown key 'sigma_strat' \(did you "
     r"mean 'sigma_start'\?\); allowed keys"),
    ("sigma_start: 0.02", "sigma_start: 0",
     r"conditions\.B\.aqn\.sigma_start \(line 11\): `sigma_start` must be a positive number"),
])
def test_noise_and_aqn_errors_name_the_nested_key_and_line(tmp_path: Path, old: str, new: str,
                                                           message: str) -> None:
    with pytest.raises(InputError, match=message):
        StudySpec.from_file(write(tmp_path, AQN_GOOD.replace(old, new)))


@pytest.mark.parametrize("old, new, message", [
    ("    metric: retention\n", "    metric: retension\n",
     r"hypotheses\.0\.metric \(line 17\): `metric` must be one of 'accuracy', 'retention', "
     r"got 'retension' \(did you mean 'retention'\?\)\.$"),
    ("    relation: greater\n", "    relation: greater\n    margn: 0.1\n",
     r"hypotheses\.0\.margn \(line 22\): unknown key 'margn' \(did you mean 'margin'\?\); "
     r"allowed keys"),
    ("    margin: 0\n", "    margin: -0.01\n",
     r"hypotheses\.0\.margin \(line 22\): must be a number >= 0, got -0\.01\."),
    ("    eval_noise: 0.05\n", "    eval_noise: 0\n",
     r"hypotheses\.0\.eval_noise \(line 20\): retention needs a noisy level"),
    ("    b: A\n", "    b: B\n", r"hypotheses\.0\.a \(line 18\): `a` and `b` must differ"),
    ("    margin: 0\n", "", r"hypotheses\.0 \(line 16\): missing required key 'margin'"),
    ("    margin: 0\n", "    margn: 0\n",
     r"hypotheses\.0\.margn \(line 22\): unknown key 'margn' \(did you mean 'margin'\?\)"),
])
def test_hypothesis_errors_name_the_key_and_line(tmp_path: Path, old: str, new: str,
                                                 message: str) -> None:
    with pytest.raises(InputError, match=message):
        StudySpec.from_file(write(tmp_path, GOOD.replace(old, new)))


def test_unknown_condition_names_get_a_did_you_mean(tmp_path: Path) -> None:
    text = GOOD.replace("    a: B\n", "    a: BB\n")
    with pytest.raises(InputError, match=r"hypotheses\.0\.a \(line 18\): unknown condition 'BB' "
                                         r"\(did you mean 'B'\?\); the study defines \['A', 'B'\]"):
        StudySpec.from_file(write(tmp_path, text))
    text = GOOD.replace("multiplicity: fdr_bh", "multiplicity: fdr_bh\n  reference: AA")
    with pytest.raises(InputError, match=r"analysis\.reference \(line 25\): unknown condition "
                                         r"'AA' \(did you mean 'A'\?\)"):
        StudySpec.from_file(write(tmp_path, text))


def test_duplicate_hypothesis_id_and_retention_without_clean_level(tmp_path: Path) -> None:
    hyp = GOOD[GOOD.index("  - id: H1"):GOOD.index("analysis:")]
    with pytest.raises(InputError, match=r"hypotheses\.1\.id \(line 23\): duplicate hypothesis "
                                         r"id 'H1'"):
        StudySpec.from_file(write(tmp_path, GOOD.replace(hyp, hyp + hyp)))
    with pytest.raises(InputError, match=r"hypotheses\.0\.eval_noise \(line 20\): a retention "
                                         r"hypothesis needs the clean level 0"):
        StudySpec.from_file(write(tmp_path, GOOD.replace("[0.1, 0, 0.05]", "[0.1, 0.05]")))


def test_evaluation_kind_and_ops_are_checked_by_the_engine(tmp_path: Path) -> None:
    text = GOOD.replace("  noise_seeds: 3\n", "  noise_seeds: 3\n  kind: fp8_e4m4\n")
    with pytest.raises(InputError, match=r"evaluation\.kind \(line 14\): `kind` must be one of "
                                         r".*, got 'fp8_e4m4' \(did you mean 'fp8_e4m3'\?\)\.$"):
        StudySpec.from_file(write(tmp_path, text))
    text = GOOD.replace("  noise_seeds: 3\n", "  noise_seeds: 3\n  ops: matmul_onyl\n")
    with pytest.raises(InputError, match=r"evaluation\.ops \(line 14\): `ops` must be"):
        StudySpec.from_file(write(tmp_path, text))


def test_evaluation_noise_is_the_cells_noise_spec(tmp_path: Path) -> None:
    ev = StudySpec.from_file(write(tmp_path, GOOD)).evaluation
    assert ev.noise(0.0, 0) is None
    assert ev.noise(0.05, 2) == NoiseSpec(scale=0.05, kind="relative_gaussian", phases="forward",
                                          ops="matmul_only", seed=2)


def test_one_list_of_multiplicity_methods(tmp_path: Path) -> None:
    assert MULTIPLICITY_CHOICES == tuple(MULTIPLICITY_METHODS)
    assert MULTIPLICITY_CHOICES.count("none") == 1
    for method in MULTIPLICITY_CHOICES:
        text = GOOD.replace("multiplicity: fdr_bh", f"multiplicity: {method}")
        assert StudySpec.from_file(write(tmp_path, text)).analysis.multiplicity == method
    text = GOOD.replace("multiplicity: fdr_bh", "multiplicity: hlom")
    with pytest.raises(InputError, match=r"analysis\.multiplicity \(line 24\): must be one of "
                                         r"'holm', .*'none' \(did you mean 'holm'\?\)"):
        StudySpec.from_file(write(tmp_path, text))


def test_hash_of_the_committed_e8_version_is_unchanged() -> None:
    manifest = json.loads((ROOT / "results" / "e8_matrix" / "v1" / "manifest.json").read_text())
    spec = StudySpec.from_file(ROOT / "studies" / "e8_matrix.yaml").with_overrides(seeds=5)
    assert spec.resolved() == manifest["spec"]
    assert spec.spec_hash() == manifest["spec_hash"]
    # the resolved form loads back to the same study (``analyze`` reads it from manifests)
    stored = {k: v for k, v in manifest["spec"].items() if k != "spec_format"}
    assert StudySpec.from_dict(stored).spec_hash() == manifest["spec_hash"]


def test_typed_objects_given_directly_and_overrides_keep_them(tmp_path: Path) -> None:
    written = StudySpec.from_file(write(tmp_path, AQN_GOOD))
    data = written.model_dump()
    data["conditions"]["B"] = {"train_noise": NoiseSpec(scale=0.05, phases="forward"),
                               "aqn": AQNSchedule(sigma_start=0.02, sigma_end=0.001)}
    data["hypotheses"] = list(written.hypotheses)
    typed = StudySpec.from_dict(data)
    for name, cond in written.conditions.items():
        assert (typed.conditions[name].train_noise, typed.conditions[name].aqn) == (
            cond.train_noise, cond.aqn)
    assert typed.hypotheses == written.hypotheses
    resolved = typed.resolved()
    assert resolved["conditions"]["B"]["train_noise"] == NoiseSpec(
        scale=0.05, phases="forward").to_dict()
    assert resolved["hypotheses"][0]["margin"] == 0.0
    again = written.with_overrides(n_items=5)
    assert again.conditions == written.conditions and again.hypotheses == written.hypotheses


def test_typed_spec_pickles_for_worker_processes(tmp_path: Path) -> None:
    spec = StudySpec.from_file(write(tmp_path, AQN_GOOD))
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and copy.spec_hash() == spec.spec_hash()
    assert copy.where(("conditions", "B", "aqn")) == spec.where(("conditions", "B", "aqn"))


def test_loading_a_study_never_imports_torch() -> None:
    code = ("import sys\n"
            "from robuststats.study import StudySpec\n"
            "from robuststats.engine import NoiseSpec, AQNSchedule\n"
            f"spec = StudySpec.from_file({str(ROOT / 'studies' / 'e8_matrix.yaml')!r})\n"
            "assert spec.conditions['E8b'].train_noise.phases == 'both'\n"
            "NoiseSpec(scale=0.1); AQNSchedule(total_steps=10).sigma(5)\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_written_forms_never_outlive_the_objects_they_describe(tmp_path: Path) -> None:
    import dataclasses

    spec = StudySpec.from_file(write(tmp_path, AQN_GOOD))
    assert spec.resolved()["hypotheses"][0]["margin"] == 0  # as written (an int)
    changed = spec.model_copy(update={
        "hypotheses": [dataclasses.replace(spec.hypotheses[0], margin=0.02)]})
    assert changed.resolved()["hypotheses"][0]["margin"] == 0.02
    assert changed.spec_hash() != spec.spec_hash()
    b = spec.conditions["B"]
    louder = b.model_copy(update={"train_noise": b.train_noise.replace(scale=0.1)})
    dumped = louder.model_dump()
    assert dumped["train_noise"]["scale"] == 0.1
    assert dumped["aqn"] == {"sigma_start": 0.02, "sigma_end": 0.001}  # still as written
