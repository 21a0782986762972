"""The two stages of the ``grpo`` trainer (:mod:`robuststats.models.grpo`): the clean
supervised warm start and the GRPO run with TRL under the condition's noise."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.models.model import build_model, build_tokenizer
from robuststats.models.tasks import extract_answer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.models.tasks import Task
    from robuststats.models.trainer import TrainingCondition

__all__ = ["reward_functions", "run_grpo", "warm_start"]

#: warm starts of this process by (task, seed, sizes, steps): every condition of a seed
#: starts from the same weights, so they are trained once (deterministic either way)
_WARM: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
_WARM_LIMIT = 16


def warm_start(task: Task, seed: int, params: Mapping[str, Any], directory: Path
               ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """The warm-start model (saved in ``directory``, where TRL loads it and its reference
    copy from) and the supervised loop's ``info``."""
    from robuststats.models.trainer import TrainingCondition
    from robuststats.models.training import run_training

    sft = {"steps": params["warmup_steps"], "lr": params["warmup_lr"],
           "batch_size": params["warmup_batch_size"], "warmup": 0.05, "weight_decay": 0.01}
    key = hashlib.sha256(json.dumps([task.describe(), seed, sft, params["model"]],
                                    sort_keys=True, default=str).encode()).hexdigest()
    tokenizer = build_tokenizer(task.vocabulary())
    model = build_model(tokenizer, params["model"], seed=seed)
    if key in _WARM:
        state, info = _WARM[key]
        model.load_state_dict(state)
    else:
        info = {"steps": 0}
        if sft["steps"]:
            clean = TrainingCondition("warm start")
            info = run_training(model, tokenizer, task, task.items("train"), clean, seed=seed,
                                params=sft)
        if len(_WARM) >= _WARM_LIMIT:
            _WARM.pop(next(iter(_WARM)))
        _WARM[key] = ({k: v.clone() for k, v in model.state_dict().items()}, info)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    model.eval()
    return model, tokenizer, {"loss": info.get("loss"), "steps": sft["steps"]}


def reward_functions(task: Task, items: list[Any]) -> list[Callable[..., list[float]]]:
    """TRL reward functions: exact match of the final answer, and the answer format."""

    def exact_match(completions: list[str], item: list[int], **kwargs: Any) -> list[float]:
        return [float(task.score(items[i], c)) for i, c in zip(item, completions, strict=True)]

    def answer_format(completions: list[str], **kwargs: Any) -> list[float]:
        return [float(extract_answer(c) is not None) for c in completions]

    return [exact_match, answer_format]


def run_grpo(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, task: Task,
             condition: TrainingCondition, seed: int, params: Mapping[str, Any],
             workdir: Path, *, progress: Callable[[int, int], None] | None = None
             ) -> dict[str, Any]:
    """Train with TRL's ``GRPOTrainer`` from the warm start saved in ``workdir/warm_start``;
    the trained weights are copied into ``model``. Returns the ``info`` record."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from robuststats.engine import NoiseSpec
    from robuststats.integrations.transformers import add_noise, verify_noise_proof
    from robuststats.models.generation import default_max_new_tokens
    from robuststats.models.training import training_noise_seed

    items = task.items("train")
    data = Dataset.from_list([{"prompt": task.render_prompt(it, tokenizer), "item": i}
                              for i, it in enumerate(items)])
    out = workdir / "grpo"
    args = GRPOConfig(
        str(out), max_steps=params["steps"], num_generations=params["group_size"],
        per_device_train_batch_size=params["prompts_per_step"] * params["group_size"],
        max_completion_length=params["max_new_tokens"] or default_max_new_tokens(
            tokenizer, task, items),
        beta=params["beta"], learning_rate=params["lr"], temperature=params["temperature"],
        reward_weights=[1.0, params["format_weight"]], seed=seed, data_seed=seed,
        use_cpu=True, report_to=[], save_strategy="steps", save_steps=params["save_steps"],
        logging_steps=1, gradient_checkpointing=False, disable_tqdm=True,
        log_completions=False)
    trainer = GRPOTrainer(model=str(workdir / "warm_start"),
                          reward_funcs=reward_functions(task, items), args=args,
                          train_dataset=data, processing_class=tokenizer)
    spec, excluded = _training_spec(condition, seed, training_noise_seed, NoiseSpec)
    if spec is not None:
        add_noise(trainer, spec, during=params["during"], aqn=condition.aqn)
    if progress is not None:
        class _Progress(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                progress(int(state.global_step), int(state.max_steps))

        trainer.add_callback(_Progress())
    resume = get_last_checkpoint(str(out)) if out.is_dir() else None
    trainer.train(resume_from_checkpoint=resume)
    info: dict[str, Any] = {"steps": params["steps"], "resumed_from": resume,
                            **_curves(trainer.state.log_history)}
    if spec is not None:
        proof = verify_noise_proof(out, during=params["during"] if spec.is_active else ())
        info["train_noise"] = spec.to_dict()
        info["noise_during"] = list(params["during"])
        info["lm_head_excluded"] = excluded
        info["injection_stats"] = {f"{part}/{op}/{phase}": n
                                   for (part, op, phase), n in sorted(proof.counts.items())}
    trained = trainer.model
    vars(trained).pop("forward", None)  # TRL's fused log-probability forward
    model.load_state_dict(trained.state_dict())
    return info


def _training_spec(condition: TrainingCondition, seed: int, mix: Callable[[int, int], int],
                   spec_class: Any) -> tuple[Any, bool]:
    """The condition's spec for this seed, with the LM head switched off unless the spec
    names it (TRL's fused log-probability head is out of the engine's reach)."""
    spec = condition.noise
    if spec is None:
        return (spec_class(scale=0.0), False) if condition.aqn is not None else (None, False)
    if not spec.is_active:
        return (spec, False) if condition.aqn is not None else (None, False)
    scales = dict(spec.layer_scales or {})
    excluded = "lm_head" not in scales
    if excluded:
        scales["lm_head"] = 0.0
    return spec.replace(seed=mix(spec.seed, seed), layer_scales=scales), excluded


def _curves(history: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [h for h in history if "reward" in h]
    return {"reward_curve": [round(float(h["reward"]), 4) for h in rows],
            "kl_curve": [round(float(h.get("kl", float("nan"))), 6) for h in rows],
            "final_reward": float(rows[-1]["reward"]) if rows else None}
