"""Checkpoints robuststats saves load through ``AutoModelForCausalLM`` and ``AutoTokenizer``
as exactly what robuststats used: the same token ids, the same logits (issue 12, item 2)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from robuststats.errors import InputError
from robuststats.models.model import build_model, build_tokenizer, load_pretrained
from robuststats.models.trainer import TrainedModel, TrainingCondition, get_trainer

TEXTS = [
    "Question: Natalia sold clips to 48 of her friends in April.\nAnswer: ",
    "48/2 = <<48/2=24>>24 clips in May.\n#### 72",
    "  spaces,\ttabs and café: 1,234.50 € \\boxed{-3}",
]


def _auto(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval(),
            AutoTokenizer.from_pretrained(path, local_files_only=True))


def _same_ids_and_logits(model, tokenizer, auto_model, auto_tokenizer):
    for text in TEXTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert auto_tokenizer(text, add_special_tokens=False)["input_ids"] == ids
        assert auto_tokenizer(text)["input_ids"] == tokenizer(text)["input_ids"]
        assert auto_tokenizer.decode(ids) == text
    assert (auto_tokenizer.pad_token_id, auto_tokenizer.eos_token_id) == \
        (tokenizer.pad_token_id, tokenizer.eos_token_id)
    assert auto_tokenizer.padding_side == "left"
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt", add_special_tokens=False)
    auto_batch = auto_tokenizer(TEXTS, padding=True, return_tensors="pt",
                                add_special_tokens=False)
    assert torch.equal(batch["input_ids"], auto_batch["input_ids"])
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, auto_model(**auto_batch).logits)


def test_saved_tiny_model_round_trips_through_auto_classes(tmp_path):
    tokenizer = build_tokenizer(["####", "clips", "friends", "April", "May", "Answer"])
    model = build_model(tokenizer, {"hidden_size": 32, "num_layers": 2,
                                    "intermediate_size": 64}, seed=3)
    path = TrainedModel(model, tokenizer, {"note": "cached"}).save(tmp_path / "m")
    auto_model, auto_tokenizer = _auto(path)
    assert type(auto_tokenizer).__name__ == "Qwen2Tokenizer"
    assert type(auto_model).__name__ == "Qwen2ForCausalLM"
    _same_ids_and_logits(model, tokenizer, auto_model, auto_tokenizer)
    # and robuststats' own loader gives the same again
    loaded = TrainedModel.load(path)
    _same_ids_and_logits(model, tokenizer, loaded.model, loaded.tokenizer)
    assert loaded.info == {"note": "cached"}


def test_trained_model_round_trips_through_auto_classes(tmp_path):
    from robuststats.models.tasks import get_task

    task = get_task("arithmetic", n_items=20, n_train=40, seed=0)
    trainer = get_trainer("builtin", steps=3, batch_size=8, train_eval_items=0,
                          model={"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    trained = trainer.train(task, TrainingCondition("clean"), seed=0)
    path = trained.save(tmp_path / "trained")
    auto_model, auto_tokenizer = _auto(path)
    _same_ids_and_logits(trained.model, trained.tokenizer, auto_model, auto_tokenizer)
    prompt = task.items("test")[0].prompt
    assert auto_tokenizer(prompt)["input_ids"] == trained.tokenizer(prompt)["input_ids"]


def test_missing_or_empty_tokenizer_fails_loudly(tmp_path):
    tokenizer = build_tokenizer(["####"])
    model = build_model(tokenizer, {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    path = TrainedModel(model, tokenizer).save(tmp_path / "m")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).unlink()
    with pytest.raises(InputError, match=r"`path`: .* has no tokenizer files \(one of "
                                         r"tokenizer.json, vocab.json"):
        load_pretrained(path)
    # a tokenizer.json whose vocabulary is empty: transformers builds a tokenizer that
    # encodes everything to nothing; robuststats refuses it
    broken = tmp_path / "broken"
    TrainedModel(model, tokenizer).save(broken)
    data = json.loads((broken / "tokenizer.json").read_text())
    data["model"]["vocab"], data["model"]["merges"], data["added_tokens"] = {}, [], []
    (broken / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"encodes text to no tokens"):
        load_pretrained(broken)


def test_tokenizer_of_another_model_is_refused(tmp_path):
    small = build_tokenizer()
    model = build_model(small, {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    path = TrainedModel(model, small).save(tmp_path / "m")
    big = build_tokenizer(["alpha", "beta", "gamma"])  # 5 + 4 + 5 merged tokens
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).unlink()
    big.save_pretrained(path)
    with pytest.raises(InputError, match=r"has 273 tokens but the model's vocabulary has 259"):
        load_pretrained(path)


def test_directories_with_the_earlier_word_level_tokenizer_still_load(tmp_path):
    """Run caches written before the Qwen2-format tokenizer keep loading as what they were."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<unk>", *"0123456789 +=#\n",
                                         " apples"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r" apples|[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    old = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                  eos_token="<eos>", unk_token="<unk>",
                                  clean_up_tokenization_spaces=False)
    model = build_model(old, {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    path = tmp_path / "old"
    model.save_pretrained(path)
    old.save_pretrained(path)
    _, tok = load_pretrained(path)
    text = "12 apples\n#### 3"
    assert tok(text, add_special_tokens=False)["input_ids"] == \
        old(text, add_special_tokens=False)["input_ids"]
    shutil.rmtree(path)
