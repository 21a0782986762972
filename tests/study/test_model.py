"""The tiny Qwen2 and its tokenizer: round trips, determinism, save and load."""

from __future__ import annotations

import pytest
import torch

from robuststats.errors import InputError
from robuststats.models.model import ModelSpec, build_model, build_tokenizer, load_pretrained

WORDS = ["####", "apples", "apple", "has", "How", "many"]



@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def test_tokenizer_round_trips_any_text(tokenizer):
    texts = [
        "Ann has 12 apples, buys 7. How many apples?\n12+7=19\n#### 19",
        "hasty applesauce: 1,234.5 -> $6!\t~{}",
        "", " ", "\n\n", "####", "  two  spaces", "café 5 € \\boxed{3}", "\r\n\x00",
    ]
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_tokenizer_splits_digits_and_keeps_known_words_whole(tokenizer):
    tokens = tokenizer.convert_ids_to_tokens(
        tokenizer("Ann has 120 apples\n#### 19", add_special_tokens=False)["input_ids"])
    # byte-level symbols: "Ġ" is a space, "Ċ" a newline
    assert tokens == ["A", "n", "n", "Ġhas", "Ġ", "1", "2", "0", "Ġapples", "Ċ", "####",
                      "Ġ", "1", "9"]
    # "apple" is a word but "apples" is whole; "hasty" is no single token
    assert "Ġapples" in tokenizer.convert_ids_to_tokens(tokenizer(" apples")["input_ids"])
    assert len(tokenizer(" hasty")["input_ids"]) > 1
    assert tokenizer.convert_ids_to_tokens(tokenizer("#####")["input_ids"]) == ["####", "#"]


def test_tokenizer_special_tokens_and_non_ascii(tokenizer):
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    assert tokenizer.padding_side == "left"
    ids = tokenizer("é", add_special_tokens=False)["input_ids"]
    assert len(ids) == 2 and tokenizer.unk_token_id not in ids  # its two UTF-8 bytes
    assert tokenizer("x")["input_ids"] == tokenizer("x", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode([40, 41, tokenizer.eos_token_id, 0], skip_special_tokens=True) \
        == tokenizer.decode([40, 41])


def test_tokenizer_is_deterministic_in_its_words():
    a, b = build_tokenizer(["zeta", "alpha"]), build_tokenizer(["alpha", "zeta", "alpha"])
    assert a.get_vocab() == b.get_vocab()
    assert len(build_tokenizer()) == 3 + 256  # specials + one token per byte
    # " zeta" needs the prefixes " z", " ze", " zet" and itself: 4 merges, 4 tokens
    assert len(build_tokenizer(["zeta"])) == 3 + 256 + 4


def test_model_is_real_qwen2_with_sdpa(tokenizer):
    from transformers import Qwen2ForCausalLM

    model = build_model(tokenizer, {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    assert isinstance(model, Qwen2ForCausalLM)
    assert model.config._attn_implementation == "sdpa"
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 32
    assert not model.training


def test_model_init_is_seeded_without_touching_global_rng(tokenizer):
    spec = ModelSpec(hidden_size=32, num_layers=1, intermediate_size=64)
    state = torch.random.get_rng_state()
    a, b = build_model(tokenizer, spec, seed=7), build_model(tokenizer, spec, seed=7)
    c = build_model(tokenizer, spec, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.endswith("proj.weight"):
            assert not torch.equal(pa, pc), name
    q = a.model.layers[0].self_attn.q_proj
    assert torch.all(q.bias == 0) and abs(float(q.weight.detach().std()) - 0.02) < 0.005


def test_save_and_load_pretrained_round_trip(tmp_path, tokenizer):
    model = build_model(tokenizer, {"hidden_size": 32, "num_layers": 2, "intermediate_size": 64},
                        seed=1)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, tok = load_pretrained(tmp_path)
    text = "Ann has 5 apples.\n#### 5"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tok(text, add_special_tokens=False)["input_ids"] == ids
    assert tok.decode(ids) == text and tok.padding_side == "left"
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)
    assert loaded.config._attn_implementation == "sdpa"


def test_load_pretrained_errors(tmp_path):
    with pytest.raises(InputError, match=r"`path` must be a directory with a saved model"):
        load_pretrained(tmp_path / "nothing")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=r"`path`: .* has no tokenizer files"):
        load_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match=r"`path`: cannot load a model from"):
        load_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"hidden_size": 0}, r"`model.hidden_size` must be a positive integer, got 0\."),
        ({"num_layer": 2}, r"unknown parameter `model.num_layer` \(did you mean 'num_layers'\?\)"),
        ({"hidden_size": 30, "num_heads": 4}, r"`model.hidden_size` must be divisible"),
        ({"num_heads": 4, "num_kv_heads": 3}, r"`model.num_heads` must be a multiple"),
        ({"rope_theta": -1}, r"`model.rope_theta` must be a positive number, got -1\."),
    ],
)
def test_model_spec_errors(params, message):
    with pytest.raises(InputError, match=message):
        ModelSpec.from_dict(params)
