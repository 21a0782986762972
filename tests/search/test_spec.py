"""Search files: validation errors name the key and its line; overrides; hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from robuststats.errors import InputError
from robuststats.search import SearchSpec
from tests.search.conftest import DELETE, tiny, write


def test_the_shipped_search_file_loads() -> None:
    spec = SearchSpec.from_file("studies/adaptive_search.yaml")
    assert spec.search.objective == "tolerance"
    assert spec.eval_level == 0.05
    assert spec.search_noise_seeds() == [0, 1]
    assert spec.fresh_noise_seeds() == [2, 3, 4]  # after the search's: fresh
    assert spec.search.sampler_name == "tpe" and spec.search.pruner_name == "none"


@pytest.mark.parametrize(("changes", "match"), [
    ({"search.objectiv": "tolerance"},
     r"search\.objectiv \(line \d+\): unknown key; did you mean 'objective'\?"),
    ({"search.objective": "tolerence"},
     r"search\.objective \(line \d+\): .*'tolerance'"),
    ({"search.scale_range": [2.0, 4.0]},
     r"search\.scale_range \(line \d+\): must contain 1 \(the uniform baseline\)"),
    ({"search.scale_range": [4.0, 0.5]}, r"search\.scale_range .*low must be below high"),
    ({"search.scale_range": [0.0, 4.0]}, r"search\.scale_range .*two positive numbers"),
    ({"search.scale_range": [1e-6, 4.0]}, r"search\.scale_range .*must lie within"),
    ({"search.bound": 0}, r"search\.bound \(line \d+\): .*greater than 0"),
    ({"search.trials": 0}, r"search\.trials \(line \d+\)"),
    ({"search.sampler": "nsga2"}, r"search\.sampler \(line \d+\): nsga2 is a multi-objective"),
    ({"search.pruner": "median"}, r"search\.pruner \(line \d+\): the tolerance objective"),
    ({"search.objective": "training"},
     r"search\.train_noise \(line \d+\): the training objective needs"),
    ({"search.objective": "training",
      "search.train_noise": {"scale": 0.05, "layer_scales": {0: 2.0}}},
     r"search\.train_noise\.layer_scales \(line \d+\): is what the search sets"),
    ({"search.train_noise": {"scale": -1}}, r"search\.train_noise\.scale \(line \d+\)"),
    ({"evaluation.noise_levels": [0, 0.05, 0.1]},
     r"evaluation\.noise_levels \(line \d+\): .*exactly one positive level"),
    ({"evaluation.noise_levels": [0]}, r"evaluation\.noise_levels .*exactly one positive"),
    ({"evaluation.kind": "nvfp4_weights", "evaluation.noise_levels": [0, 1e-3]},
     r"evaluation\.kind \(line \d+\): 'nvfp4_weights' is a number format"),
    ({"search.reevaluation.noise_seeds": [0, 7]},
     r"search\.reevaluation\.noise_seeds \(line \d+\): must be fresh: noise seed\(s\) \[0\]"),
    ({"search.reevaluation.seeds": [0]},
     r"search\.reevaluation\.seeds \(line \d+\): must be fresh"),
    ({"search.reevaluation.holdout": 3},
     r"search\.reevaluation\.holdout \(line \d+\): unknown key; did you mean 'holdout_items'"),
    ({"search.heuristic.robust_below": 0.5},
     r"search\.heuristic\.robust_below \(line \d+\): must not exceed sensitive_above"),
    ({"search": DELETE}, r"search \(line \d+\)|search: required key is missing"),
    ({"name": "a/b"}, r"name \(line \d+\): search name 'a/b' must be"),
])
def test_errors_name_the_key_and_line(tmp_path: Path, changes: dict, match: str) -> None:
    path = write(tmp_path / "s.yaml", tiny(**changes))
    with pytest.raises(InputError, match=match) as info:
        SearchSpec.from_file(path)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_trials_flag_overrides_the_file_only_when_given(tmp_path: Path) -> None:
    spec = SearchSpec.from_file(write(tmp_path / "s.yaml", tiny()))
    assert spec.with_overrides(trials=None).search.trials == 4
    assert spec.with_overrides(trials=9).search.trials == 9
    with pytest.raises(InputError, match=r"`trials` must be an integer in \[1, 100,000\]"):
        spec.with_overrides(trials=0)


def test_run_hash_covers_what_trials_depend_on_only() -> None:
    base = SearchSpec.from_dict(tiny())
    same = [tiny(**{"search.trials": 50}), tiny(**{"search.sampler_seed": 3}),
            tiny(**{"search.reevaluation.noise_seeds": 5}), tiny(description="other"),
            tiny(**{"search.sensitivity": "x.json"})]
    for data in same:
        assert SearchSpec.from_dict(data).run_hash() == base.run_hash()
    other = [tiny(**{"search.bound": 0.1}), tiny(**{"search.scale_range": [0.5, 2.0]}),
             tiny(**{"evaluation.noise_seeds": 2}), tiny(**{"trainer.params.steps": 13}),
             tiny(**{"search.multi_objective": True}), tiny(**{"search.space": "block"})]
    for data in other:
        assert SearchSpec.from_dict(data).run_hash() != base.run_hash()


def test_fresh_seeds_follow_the_search_seeds() -> None:
    spec = SearchSpec.from_dict(tiny(**{"evaluation.noise_seeds": [3, 9], "seeds": [4],
                                        "search.reevaluation.seeds": 2}))
    assert spec.fresh_noise_seeds() == [10, 11]
    assert spec.fresh_seeds() == [5, 6]


def test_loading_a_search_file_imports_neither_torch_nor_optuna(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path / "s.yaml", tiny())
    code = ("import sys; from robuststats.search import SearchSpec; "
            f"SearchSpec.from_file({str(path)!r}); "
            "print('torch' in sys.modules, 'optuna' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
