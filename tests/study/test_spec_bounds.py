"""Study files that cannot hurt: bounded YAML, bounded sizes, plain text, one-line errors.

Each bad file must fail at load time, before any cell, with one line that names the key
(and its line where the file has one).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_study_spec import GOOD

from robuststats.config.yaml_lines import MAX_DEPTH, MAX_FILE_BYTES, load_yaml_with_lines
from robuststats.engine import NoiseSpec
from robuststats.errors import InputError
from robuststats.models.model import MAX_PARAMETERS, ModelSpec
from robuststats.models.registry import Registry
from robuststats.models.tasks import get_task
from robuststats.models.tasks._arithmetic import _count_problems, _enumerate
from robuststats.models.trainer import get_trainer
from robuststats.runs.spec import MAX_CELLS, MAX_NAME_LENGTH, StudySpec


def load(tmp_path: Path, text: str | bytes) -> StudySpec:
    path = tmp_path / "study.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return StudySpec.from_file(path)


def one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------- YAML bounds
def test_billion_laughs_is_refused_quickly(tmp_path: Path) -> None:
    rows = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        rows.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"\(line 6\): invalid YAML: the document expands to "
                                         r"more than 100,000 values") as exc:
        load(tmp_path, "\n".join(rows) + "\n")
    assert time.perf_counter() - started < 5
    one_line(exc)


def test_recursive_alias_and_deep_nesting(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\(line 2\): invalid YAML: an alias refers to a "
                                         "value that contains it"):
        load(tmp_path, "name: x\na: &a [1, *a]\n")
    deep = "name: x\nmodel: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(InputError, match=rf"\(line 2\): invalid YAML: values are nested more "
                                         rf"than {MAX_DEPTH} levels deep"):
        load(tmp_path, deep)
    # a structure just within the bound loads (and is then refused by the schema)
    ok = "model: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    data, _ = load_yaml_with_lines(ok)
    assert isinstance(data["model"], list)


def test_file_size_encoding_and_control_bytes(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=rf"larger than {MAX_FILE_BYTES // 1024} KiB"):
        load(tmp_path, "# " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(InputError, match=r"study.yaml \(line 3\): not UTF-8 text \(byte 0xff\)"):
        load(tmp_path, b"name: x\nversion: 1\ndescription: \xff\xfe\n")
    with pytest.raises(InputError, match=r"\(line 2\): invalid YAML: the control character U\+0000 "
                                         "is not allowed"):
        load(tmp_path, b"name: x\ndescription: a\x00b\n")
    with pytest.raises(InputError, match=r"^study file '.*' is not a regular file\.$"):
        StudySpec.from_file(tmp_path)
    with pytest.raises(InputError, match=r"^study file '/dev/null' is not a regular file\.$"):
        StudySpec.from_file("/dev/null")
    with pytest.raises(InputError, match=r"study file '/x+\.\.\.x+\.yaml' cannot be read: "
                                         "File name too long"):
        StudySpec.from_file("/" + "x" * 5000 + ".yaml")


def test_bad_literals_and_complex_keys_name_their_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\(line 2\): invalid YAML: cannot read the value "
                                         r"'2001-13-45'"):
        load(tmp_path, "name: x\ndescription: 2001-13-45\n")
    with pytest.raises(InputError, match=r"\(line 2\): invalid YAML: cannot read the value"):
        load(tmp_path, "name: x\nversion: " + "9" * 5000 + "\n")
    with pytest.raises(InputError, match=r"\(line 3\): a key must be a name, not a list "
                                         r"\(under model\)"):
        load(tmp_path, "name: x\nmodel:\n  ? [a, b]\n  : 1\n")


# ---------------------------------------------------------------------- plain text
@pytest.mark.parametrize("name", ["E8x\\n", "E8\\tx", "E8\\u2028x", "E8\\x07"])
def test_condition_names_with_control_characters(tmp_path: Path, name: str) -> None:
    text = GOOD.replace("  B:\n", f'  "{name}":\n')
    with pytest.raises(InputError, match=r"conditions \(line 6\): key '.*' must not contain "
                                         "the control character U\\+") as exc:
        load(tmp_path, text)
    one_line(exc)


def test_control_characters_in_values_but_not_line_breaks(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"description \(line 3\): text must not contain the "
                                         r"control character U\+001B"):
        load(tmp_path, GOOD.replace("version: 1\n", 'version: 1\ndescription: "a\\eb"\n'))
    with pytest.raises(InputError, match=r"U\+D800"):
        load(tmp_path, GOOD.replace("version: 1\n", 'version: 1\ndescription: "\\ud800"\n'))
    spec = load(tmp_path, GOOD.replace("version: 1\n", "version: 1\ndescription: >\n  two\n"
                                                       "  lines\n"))
    assert spec.description == "two lines\n"


def test_names_must_be_plain_and_short(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"name \(line 1\): study name 'tiny\\n' must be "
                                         "letters, digits"):
        load(tmp_path, GOOD.replace("name: tiny", 'name: "tiny\\n"'))
    long = "a" * (MAX_NAME_LENGTH + 1)
    with pytest.raises(InputError, match=rf"name \(line 1\): study name must be at most "
                                         rf"{MAX_NAME_LENGTH} characters, got {MAX_NAME_LENGTH + 1}"):
        load(tmp_path, GOOD.replace("name: tiny", f"name: {long}"))
    with pytest.raises(InputError, match=r"hypotheses.0.id \(line 16\): a hypothesis id must be "
                                         "printable"):
        load(tmp_path, GOOD.replace("- id: H1", '- id: "H1\\n"'))


def test_from_dict_bounds_depth_and_cycles() -> None:
    data: dict = {"name": "x", "version": 1}
    nested: list = []
    data["model"] = {"deep": nested}
    for _ in range(100):
        nested.append([])
        nested = nested[0]
    with pytest.raises(InputError, match=r"model.deep.0.0.0.*: values are nested more than 32"):
        StudySpec.from_dict(data)
    cyclic: dict = {"name": "x", "version": 1}
    cyclic["model"] = {"self": cyclic}
    with pytest.raises(InputError, match=r"nested more than 32 levels"):
        StudySpec.from_dict(cyclic)


# ---------------------------------------------------------------------- sizes
@pytest.mark.parametrize(("old", "new", "message"), [
    ("seeds: [4, 7, 9]", "seeds: 1000000000",
     r"seeds \(line 14\): a count must be at most 1,000, got 1000000000\."),
    ("seeds: [4, 7, 9]", "seeds: [4, 4294967296]",
     r"seeds \(line 14\): seeds must be in \[0, 4294967295\], got 4294967296\."),
    ("noise_seeds: 3", "noise_seeds: 1000000000",
     r"evaluation.noise_seeds \(line 13\): a count must be at most 1,000"),
    ("noise_seeds: 3", "noise_seeds: 1000\n  n_items: 10000000",
     r"evaluation.n_items \(line 14\): Input should be less than or equal to 1000000"),
    ("noise_seeds: 3", "noise_seeds: 3\n  batch_size: 1000000000000",
     r"evaluation.batch_size \(line 14\): Input should be less than or equal to 100000,"),
    ("multiplicity: fdr_bh", "multiplicity: fdr_bh\n  n_resamples: 1000000000000",
     r"analysis.n_resamples \(line 25\): Input should be less than or equal to 100000000,"),
    ("multiplicity: fdr_bh", "multiplicity: fdr_bh\n  rng_seed: 100000000000000000000",
     r"analysis.rng_seed \(line 25\): Input should be less than or equal to 4294967295,"),
    ("version: 1", "version: 1000000000000",
     r"version \(line 2\): Input should be less than or equal to 1000000,"),
    ("params: {seed: 0}", "params: {seed: 0}\nmodel: {hidden_size: 1000000}",
     None),
    ("train_noise: {scale: 0.05, phases: forward}",
     "train_noise: {scale: 0.05, phases: forward, layers: '0-1000000000'}",
     r"conditions.B.train_noise.layers \(line 10\): `layers` string must look like"),
    ("train_noise: {scale: 0.05, phases: forward}",
     "train_noise: {scale: 0.05, phases: forward, layers: {window: 1000000000}}",
     r"conditions.B.train_noise.layers \(line 10\): `layers` must hold layer indices up to "
     "99,999"),
    ("train_noise: {scale: 0.05, phases: forward}",
     "train_noise: {scale: 0.05, phases: forward}\n    aqn: {num_stages: 1000000000}",
     r"conditions.B.aqn.num_stages \(line 11\): `num_stages` must be at most 10,000"),
])
def test_sizes_are_bounded_at_load(tmp_path: Path, old: str, new: str,
                                   message: str | None) -> None:
    text = GOOD.replace(old, new)
    assert text != GOOD
    if message is None:  # model sizes are the trainer's: checked before the first cell
        from robuststats.runs import preflight

        with pytest.raises(InputError, match=r"`model.hidden_size` must be at most 16,384"):
            preflight(load(tmp_path, text))
        return
    with pytest.raises(InputError, match=message) as exc:
        load(tmp_path, text)
    one_line(exc)


def test_plan_size_is_checked_without_building_the_plan(tmp_path: Path) -> None:
    # 2 conditions × 1000 seeds × (1 clean + 2 noisy × 1000 noise seeds) = 4,002,000 cells
    text = GOOD.replace("seeds: [4, 7, 9]", "seeds: 1000").replace("noise_seeds: 3",
                                                                   "noise_seeds: 1000")
    with pytest.raises(InputError, match=rf"seeds \(line 14\): the plan has 4,002,000 cells "
                                         rf"\(2 conditions × 1000 seeds .*more than "
                                         rf"{MAX_CELLS:,}"):
        load(tmp_path, text)
    spec = load(tmp_path, GOOD)
    from robuststats.runs.plan import plan

    assert spec.n_cells() == len(plan(spec)) == 2 * 3 * (1 + 2 * 3)


def test_unknown_split_kind_and_ops_fail_at_load(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"evaluation.split \(line 14\): `split` must be one of "
                                         r"'train', 'test', got 'valid'\."):
        load(tmp_path, GOOD.replace("noise_seeds: 3", "noise_seeds: 3\n  split: valid"))
    with pytest.raises(InputError, match=r"evaluation.kind \(line 14\): `kind` must be one of"):
        load(tmp_path, GOOD.replace("noise_seeds: 3", "noise_seeds: 3\n  kind: fp3"))


# ---------------------------------------------------------------------- tasks, trainers
def test_arithmetic_capacity_count_is_exact_and_fast() -> None:
    for max_value in (2, 5, 9):
        for n_steps in (1, 2, 3):
            for ops in ("+", "-", "+-"):
                assert _count_problems(max_value, n_steps, ops) == \
                    len(_enumerate(max_value, n_steps, ops))
    started = time.perf_counter()
    _count_problems(10_000, 6, "+-")
    assert time.perf_counter() - started < 10  # the old loop needed ~10¹⁰ dict updates here


def test_arithmetic_sizes_are_bounded() -> None:
    with pytest.raises(InputError, match=r"`max_value` must be an integer in \[2, 10,000\], "
                                         r"got 1000000\."):
        get_task("arithmetic", max_value=1_000_000)
    with pytest.raises(InputError, match=r"`n_items` must be an integer in \[1, 100,000\]"):
        get_task("arithmetic", n_items=10**9)
    get_task("arithmetic", max_value=10_000, n_steps=6)  # the largest space builds at once


def test_model_sizes_are_planned_before_allocation() -> None:
    assert ModelSpec().n_parameters() == 98_816  # counted from the built Qwen2's layers
    with pytest.raises(InputError, match=rf"more than {MAX_PARAMETERS:,}"):
        ModelSpec.from_dict({"hidden_size": 4096, "intermediate_size": 16384,
                             "num_layers": 8})
    with pytest.raises(InputError, match=r"`model.rope_theta` must be a positive number, "
                                         r"got inf"):
        ModelSpec.from_dict({"rope_theta": float("inf")})
    with pytest.raises(InputError, match=r"`steps` must be at most 10,000,000"):
        get_trainer("builtin", steps=10**12)


def test_a_reference_factory_with_the_wrong_signature_is_an_input_error() -> None:
    registry: Registry[object] = Registry("task")
    with pytest.raises(InputError, match=r"task 'os.path:join' does not take the parameters "
                                         r"\['n_items'\]"):
        registry.build("os.path:join", n_items=3)


def test_noise_spec_refuses_arrays_and_huge_layer_ranges() -> None:
    np = pytest.importorskip("numpy")
    with pytest.raises(InputError, match="`ops` contains an unknown op"):
        NoiseSpec(0.1, ops=np.array([["linear", "bmm"]]))
    with pytest.raises(InputError, match="`layers` must hold layer indices up to 99,999"):
        NoiseSpec(0.1, layers="5-100000")
    assert NoiseSpec(0.1, layers="0-3").layer_indices == (0, 1, 2, 3)
