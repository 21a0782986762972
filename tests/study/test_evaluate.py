"""Evaluator: batched greedy decoding, scoring, inference noise through the engine."""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import InjectionVerificationError, NoiseSpec
from robuststats.errors import InputError
from robuststats.models.evaluate import evaluate
from robuststats.models.generation import default_max_new_tokens, generate_greedy
from robuststats.models.tasks import get_task
from robuststats.models.trainer import TrainingCondition, get_trainer


@pytest.fixture(scope="module")
def task():
    return get_task("arithmetic", n_items=60, n_train=400, n_steps=2, max_value=5, seed=1)


@pytest.fixture(scope="module")
def trained(task):
    trainer = get_trainer("builtin", steps=300, lr=5e-3, batch_size=32, train_eval_items=0)
    return trainer.train(task, TrainingCondition("E8a"), seed=0)


def test_clean_evaluation_frame(task, trained):
    items = task.items("test")
    df = evaluate(trained, task, items, batch_size=16)
    assert list(df.columns) == ["item_id", "correct", "completion"]
    assert df["item_id"].tolist() == [i.item_id for i in items]
    assert set(df["correct"].unique()) <= {0, 1}
    assert df["correct"].tolist() == [int(task.score(i, c))
                                      for i, c in zip(items, df["completion"])]
    assert df["correct"].mean() >= 0.15  # learned something, so noise has something to break
    assert df.attrs["eval_noise"] == 0.0 and df.attrs["injections"] == 0
    assert df.attrs["max_new_tokens"] == default_max_new_tokens(trained.tokenizer, task, items)
    # default items are the test split
    assert evaluate(trained, task)["correct"].tolist() == df["correct"].tolist()


def test_batched_greedy_equals_one_by_one(task, trained):
    # left padding with mask-derived positions must not change any completion
    prompts = [i.prompt for i in task.items("test")[:12]]
    prompts.append("Jo has 5 coins, finds 10, gives 3. How many coins?\n")  # longer prompt
    one = generate_greedy(trained.model, trained.tokenizer, prompts, max_new_tokens=20,
                          batch_size=1)
    many = generate_greedy(trained.model, trained.tokenizer, prompts, max_new_tokens=20,
                           batch_size=5)
    assert one == many


def test_greedy_matches_transformers_generate(task, trained):
    tok, model = trained.tokenizer, trained.model
    for item in task.items("test")[:3]:
        ids = tok(item.prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=16, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
        expected = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        mine = generate_greedy(model, tok, [item.prompt], max_new_tokens=16)[0]
        assert mine == expected


def test_noise_changes_outcomes_and_is_reproducible_by_noise_seed(task, trained):
    clean = evaluate(trained, task, batch_size=32)
    spec = NoiseSpec(scale=0.10, kind="relative_gaussian", ops="matmul_only")
    a = evaluate(trained, task, noise=spec, noise_seed=0, batch_size=32)
    b = evaluate(trained, task, noise=spec, noise_seed=0, batch_size=32)
    c = evaluate(trained, task, noise=spec, noise_seed=1, batch_size=32)
    assert a["completion"].tolist() == b["completion"].tolist()
    assert a["completion"].tolist() != c["completion"].tolist()
    assert a["completion"].tolist() != clean["completion"].tolist()
    # (a weakly trained model may gain or lose a few items at 10 %; heavy noise destroys it)
    heavy = evaluate(trained, task, noise=spec.replace(scale=1.0), noise_seed=0, batch_size=32)
    assert heavy["correct"].sum() < clean["correct"].sum() / 2
    assert a.attrs["eval_noise"] == 0.10 and a.attrs["noise_seed"] == 0
    assert a.attrs["noise"]["seed"] == 0 and a.attrs["noise"]["phases"] == "forward"
    assert a.attrs["injections"] > 0
    stats = a.attrs["injection_stats"]
    assert {row["phase"] for row in stats} == {"forward"}
    assert {"linear", "attention_scores", "attention_output"} <= {row["op"] for row in stats}
    # the model is left clean after the noisy evaluation
    assert evaluate(trained, task, batch_size=32)["completion"].tolist() \
        == clean["completion"].tolist()


def test_eval_forces_forward_phase_and_zero_scale_is_clean(task, trained):
    items = task.items("test")[:8]
    both = NoiseSpec(scale=0.05, phases="both")  # a training spec reused for evaluation
    df = evaluate(trained, task, items, noise=both, noise_seed=3)
    assert df.attrs["noise"]["phases"] == "forward" and df.attrs["injections"] > 0
    zero = evaluate(trained, task, items, noise=NoiseSpec(scale=0.0))
    assert zero.attrs["eval_noise"] == 0.0
    assert zero["completion"].tolist() == evaluate(trained, task, items)["completion"].tolist()


def test_requested_op_without_injections_fails_loudly(task, trained):
    # Qwen2 uses SiLU: a spec asking for GELU noise would silently do nothing
    spec = NoiseSpec(scale=0.05, ops=["gelu"])
    with pytest.raises(InjectionVerificationError, match=r"never injected: op 'gelu'"):
        evaluate(trained, task, task.items("test")[:4], noise=spec)


def test_progress_callback_and_errors(task, trained):
    seen = []
    items = task.items("test")[:10]
    evaluate(trained, task, items, batch_size=4, progress=lambda done, total: seen.append(done))
    assert seen == [4, 8, 10]
    with pytest.raises(InputError, match=r"`items` must not be empty"):
        evaluate(trained, task, [])
    with pytest.raises(InputError, match=r"`noise_seed` must be a non-negative integer, got -1"):
        evaluate(trained, task, items, noise_seed=-1)
    with pytest.raises(InputError, match=r"`batch_size` must be a positive integer, got 0"):
        evaluate(trained, task, items, batch_size=0)
    with pytest.raises(InputError, match=r"`max_new_tokens` must be a positive integer"):
        evaluate(trained, task, items, max_new_tokens=0)


def test_greedy_generation_uses_the_forward_s_own_cache_keyword(task, trained):
    # transformers 5.24 renamed the forward's `past_key_values` to `cache` and warns on the
    # old name; generation passes whichever the forward takes, so no FutureWarning appears
    import inspect
    import warnings

    from robuststats.models.generation import _cache_keyword

    params = inspect.signature(trained.model.forward).parameters
    assert _cache_keyword(trained.model) == ("cache" if "cache" in params
                                             else "past_key_values")
    prompts = [item.prompt for item in task.items("test")[:4]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        texts = generate_greedy(trained.model, trained.tokenizer, prompts, max_new_tokens=8,
                                batch_size=4)
    assert len(texts) == 4
