from __future__ import annotations

from study_doubles import fake_study

from robuststats.runs.plan import Cell, jobs
from robuststats.study import StudySpec, plan


def test_plan_counts_and_clean_cells_have_one_noise_seed() -> None:
    spec = StudySpec.from_dict(fake_study(conditions=("A", "B", "C"), seeds=3, noise_seeds=4))
    cells = plan(spec)
    # 3 conditions × 3 seeds × (1 clean + 2 noisy levels × 4 noise seeds)
    assert len(cells) == 3 * 3 * (1 + 2 * 4)
    clean = [c for c in cells if c.is_clean]
    assert {c.noise_seed for c in clean} == {0}
    assert len(clean) == 9
    assert len(set(cells)) == len(cells)
    assert len({c.key for c in cells}) == len(cells)


def test_jobs_group_cells_by_model_in_plan_order() -> None:
    spec = StudySpec.from_dict(fake_study(seeds=2, noise_seeds=1))
    grouped = jobs(plan(spec))
    assert [j.key for j in grouped] == ["A__s0", "A__s1", "B__s0", "B__s1"]
    assert all(len(v) == 3 for v in grouped.values())


def test_cell_key_is_stable() -> None:
    assert Cell("E8c", 3, 0.05, 1).key == "E8c__s3__n0.05__ns1"
    assert Cell("E8a", 0, 0.0, 0).key == "E8a__s0__n0__ns0"
