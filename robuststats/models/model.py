"""The tiny Hugging Face Qwen2 of the embedded default study, its tokenizer, local loading.

Nothing here downloads: the model is the real ``transformers`` ``Qwen2ForCausalLM`` built
from a ``Qwen2Config`` (``sdpa`` attention, as Qwen2 ships), and the tokenizer is a real
``Qwen2Tokenizer`` (byte-level BPE), so a saved directory loads with
``AutoModelForCausalLM`` and ``AutoTokenizer`` as exactly what robuststats used: the same
token ids and the same logits (lm-eval, vLLM and verl load through them).

Tokenizer design: every byte is a token and so is each word a task declares (space
prefixed, GPT-2 style), formed by BPE merges under Qwen2's own pre-tokenizer. Numbers are
spelled digit by digit, any text round-trips exactly, and task prompts stay short
(training cost on a CPU grows with sequence length). Why not a custom pre-tokenizer:
transformers 5 builds every ``qwen2`` tokenizer as ``Qwen2Tokenizer`` from the vocab and
merges of ``tokenizer.json`` and ignores its pre-tokenizer and a saved ``tokenizer_class``,
so only a tokenizer of Qwen2's own shape survives ``AutoTokenizer``.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole, field_names
from robuststats.errors import InputError, did_you_mean, first_message_line
from robuststats.models.weights import check_weights, weight_file

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "SPECIAL_TOKENS",
    "TOKENIZER_FILES",
    "ModelSpec",
    "build_model",
    "build_tokenizer",
    "check_saved_model",
    "load_pretrained",
]

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)

#: bounds of the tiny model (planned before anything is allocated): 50 M decoder
#: parameters train with Adam in about 1 GB; a larger model is not what this trainer is for
MAX_PARAMETERS = 50_000_000
_MAX_SIZE = {"hidden_size": 16_384, "num_layers": 256, "num_heads": 1_024,
             "num_kv_heads": 1_024, "intermediate_size": 65_536, "max_positions": 1_048_576}


def build_tokenizer(words: Sequence[str] = ()) -> PreTrainedTokenizerBase:
    """A Qwen2-format byte-level BPE tokenizer with whole-word tokens for ``words``.

    It is a ``transformers`` ``Qwen2Tokenizer``: Qwen2's own pre-tokenizer (NFC, Qwen2's
    split pattern, byte-level), a BPE model and a byte-level decoder, so the directory it is
    saved to loads back through ``AutoTokenizer`` as exactly this tokenizer (transformers 5
    builds every ``qwen2`` tokenizer as a ``Qwen2Tokenizer`` from ``tokenizer.json``'s vocab
    and merges, whatever ``tokenizer_class`` a directory names).

    Token ids: ``<pad>`` 0, ``<eos>`` 1, ``<unk>`` 2 (declared, never produced), the 256
    byte symbols (so any text round-trips), then the merged tokens of ``words``. A word of
    letters gets one token in its space-prefixed form (``" apples"``, as in GPT-2 and
    Qwen2 vocabularies); a word of punctuation (``"####"``) in both forms. Merges form a
    word's token as a chain of prefixes, longer prefixes first, so a pre-token that is a
    word becomes that one token and digits stay single (Qwen2 splits numbers digit by
    digit). Deterministic: the same ``words`` give the same ids.
    """
    from transformers import Qwen2Tokenizer

    byte_symbols = _byte_symbols()
    vocab: dict[str, int] = {}
    for token in (*SPECIAL_TOKENS, *byte_symbols):
        vocab.setdefault(token, len(vocab))
    merges: dict[tuple[str, str], None] = {}
    for piece in _word_pieces(words):
        symbols = "".join(byte_symbols[b] for b in piece.encode("utf-8"))
        for end in range(2, len(symbols) + 1):
            merges.setdefault((symbols[: end - 1], symbols[end - 1]), None)
            vocab.setdefault(symbols[:end], len(vocab))
    # longest prefix first: a word's own chain outranks shorter merges inside it ("####")
    ranked = sorted(merges, key=lambda m: (-len(m[0]), m))
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=ranked, unk_token=UNK, eos_token=EOS, pad_token=PAD,
        padding_side="left",  # batched generation appends on the right
        clean_up_tokenization_spaces=False,
    )
    return tokenizer


def _byte_symbols() -> list[str]:
    """The printable stand-in of each byte in byte-level BPE (GPT-2's ``bytes_to_unicode``:
    printable Latin-1 bytes are themselves, the others are shifted above U+0100)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    symbols, shift = {}, 0
    for b in range(256):
        if b in kept:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + shift)
            shift += 1
    return [symbols[b] for b in range(256)]


def _word_pieces(words: Sequence[str]) -> list[str]:
    """The pre-tokens that get a token: ``" " + word`` for every word that Qwen2's
    pre-tokenizer keeps whole after a space, and a punctuation word alone as well."""
    pieces = set()
    for word in words:
        if not isinstance(word, str) or len(word) < 2 or not word.isascii():
            continue
        if re.fullmatch(r"[A-Za-z]+", word):
            pieces.add(" " + word)
        elif re.fullmatch(r"[!-/:-@\[-`{-~]+", word):  # ASCII punctuation only
            pieces.update((word, " " + word))
    return sorted(pieces)


@dataclass(frozen=True)
class ModelSpec:
    """Size of the tiny Qwen2 (defaults: ~0.1 M parameters, fast on one CPU thread)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 192
    max_positions: int = 256
    rope_theta: float = 10000.0

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None, *, key: str = "model") -> ModelSpec:
        """Validate a mapping of sizes; errors name ``key.<field>``."""
        params = dict(params or {})
        names = sorted(field_names(cls))
        for name in params:
            if name not in names:  # the trainer's wording: its keys are "parameters"
                raise InputError(f"unknown parameter `{key}.{name}`{did_you_mean(name, names)}; "
                                 f"accepted: {', '.join(names)}.")
        for name, value in params.items():
            if name == "rope_theta":
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not 0 < value < math.inf:
                    raise InputError(f"`{key}.{name}` must be a positive number, got {value!r}.")
            else:
                check_whole(value, f"{key}.{name}", low=1, high=_MAX_SIZE[name])
        spec = cls(**params)
        if spec.hidden_size % spec.num_heads or (spec.hidden_size // spec.num_heads) % 2:
            raise InputError(f"`{key}.hidden_size` must be divisible by `{key}.num_heads` "
                             "into an even head dimension, got "
                             f"{spec.hidden_size} and {spec.num_heads}.")
        if spec.num_heads % spec.num_kv_heads:
            raise InputError(f"`{key}.num_heads` must be a multiple of `{key}.num_kv_heads`, "
                             f"got {spec.num_heads} and {spec.num_kv_heads}.")
        if spec.n_parameters() > MAX_PARAMETERS:
            raise InputError(f"`{key}` sizes give {spec.n_parameters():,} parameters in the "
                             f"decoder layers, more than {MAX_PARAMETERS:,} (this trainer "
                             "trains tiny models on a CPU).")
        return spec

    def n_parameters(self) -> int:
        """Parameters of the decoder layers (attention, MLP, norms; embeddings excluded),
        computed before anything is allocated."""
        h, head = self.hidden_size, self.hidden_size // self.num_heads
        kv = self.num_kv_heads * head
        attention = h * h + 2 * (h * kv + kv) + h + h * h  # q (with bias), k, v, o
        mlp = 3 * h * self.intermediate_size
        return self.num_layers * (attention + mlp + 2 * h)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_model(
    tokenizer: PreTrainedTokenizerBase,
    spec: ModelSpec | Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
) -> PreTrainedModel:
    """A freshly initialised ``Qwen2ForCausalLM`` sized by ``spec`` for ``tokenizer``.

    Weights are drawn from a ``torch.Generator`` seeded with ``seed`` (global RNG state is
    untouched), following Qwen2's own initialisation: normal(0, initializer_range) for
    linear and embedding weights, zero biases, unit RMSNorm weights.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if not isinstance(spec, ModelSpec):
        spec = ModelSpec.from_dict(spec)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": float(spec.rope_theta)},
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        attn_implementation="sdpa",
    )
    # transformers initialises from the global RNG; fork it so that callers' state is
    # untouched, then overwrite every parameter from our own generator.
    with torch.random.fork_rng(devices=[]):
        model = Qwen2ForCausalLM(config)
    generator = torch.Generator().manual_seed(int(seed))
    std = config.initializer_range
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif "norm" in name:
                param.fill_(1.0)
            else:  # linear and (tied) embedding weights
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    model.eval()
    return model


def load_pretrained(
    path: str | Path, *, key: str = "path"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer from a local directory (never downloads).

    Works for any ``AutoModelForCausalLM`` checkpoint saved with ``save_pretrained``,
    including the tiny Qwen2 of this module; the tokenizer is what ``AutoTokenizer`` loads
    (as lm-eval, vLLM and verl do). Weights load from safetensors when present, otherwise
    through ``torch.load(weights_only=True)``: a checkpoint never runs code. A directory
    without tokenizer files, weights the loader would refuse
    (:func:`~robuststats.models.weights.check_weights`), a tokenizer that encodes text to
    nothing, or a token id beyond the model's vocabulary is an :class:`InputError`, never a
    traceback or a silently empty tokenizer.
    The model is returned in eval mode on the CPU.
    """
    from transformers import AutoModelForCausalLM

    directory = check_saved_model(path, key=key)
    try:
        with _quiet_transformers():
            tokenizer = _load_tokenizer(directory)
            model = AutoModelForCausalLM.from_pretrained(
                directory, local_files_only=True, trust_remote_code=False, weights_only=True)
    except (OSError, ValueError, RuntimeError, TypeError, KeyError, EOFError,
            pickle.UnpicklingError) as exc:
        # the directory's files, not the code: a storage missing from a .bin archive
        # (RuntimeError), a config of the wrong shape (TypeError), weights of other sizes
        raise InputError(f"`{key}`: cannot load a model from {str(path)!r}: "
                         f"{first_message_line(exc)}") from exc
    _check_tokenizer(tokenizer, model, str(path), key)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


def check_saved_model(path: str | Path, *, key: str = "path") -> Path:
    """Check a ``save_pretrained`` directory without loading it: ``config.json``, tokenizer
    files, and weights the loader accepts (:func:`~robuststats.models.weights.check_weights`).
    Raises :class:`InputError` naming ``key``, the file and the reason; returns the path."""
    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise InputError(f"`{key}` must be a directory with a saved model (config.json), "
                         f"got {str(path)!r}.")
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(f"`{key}`: {str(path)!r} has no tokenizer files (one of "
                         f"{', '.join(TOKENIZER_FILES)}); save the tokenizer beside the model.")
    if weight_file(directory) is not None:  # none at all: the loader says what it looked for
        check_weights(directory, key=key)  # a file the loader would refuse, named before it runs
    return directory




#: files of which a checkpoint needs one for its tokenizer (transformers' serialisations)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "tekken.json",
                   "vocab.txt")


def _load_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    # Directories written before the tokenizer became Qwen2-format (a word-level
    # `tokenizers` backend, `tokenizer_class` TokenizersBackend) load as exactly that:
    # AutoTokenizer would build Qwen2's BPE pipeline around their vocabulary.
    config_file = directory / "tokenizer_config.json"
    saved_class = None
    if config_file.is_file():
        saved_class = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
    if saved_class in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return PreTrainedTokenizerFast.from_pretrained(directory, local_files_only=True)
    return AutoTokenizer.from_pretrained(directory, local_files_only=True,
                                         trust_remote_code=False)


def _check_tokenizer(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel,
                     path: str, key: str) -> None:
    probe = "Question: 12 + 7?\nAnswer: 19"
    ids = tokenizer(probe, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError(f"`{key}`: the tokenizer in {path!r} encodes text to no tokens "
                         f"({type(tokenizer).__name__} with {len(tokenizer)} tokens): its "
                         "vocabulary is missing or empty.")
    vocab_size = getattr(model.config, "vocab_size", None)
    if vocab_size is not None and len(tokenizer) > vocab_size:
        raise InputError(f"`{key}`: the tokenizer in {path!r} has {len(tokenizer)} tokens but "
                         f"the model's vocabulary has {vocab_size}: they do not belong "
                         "together.")


class _quiet_transformers:
    """Silence transformers' progress bars while loading or saving (restored on exit)."""

    def __enter__(self) -> None:
        from transformers.utils import logging as hf_logging

        self._was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()

    def __exit__(self, *exc: object) -> None:
        from transformers.utils import logging as hf_logging

        if self._was_enabled:
            hf_logging.enable_progress_bar()
