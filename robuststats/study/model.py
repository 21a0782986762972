"""The tiny Hugging Face Qwen2 of the embedded default study, its tokenizer, local loading.

Nothing here downloads: the model is the real ``transformers`` ``Qwen2ForCausalLM`` built
from a ``Qwen2Config`` (``sdpa`` attention, as Qwen2 ships), and the tokenizer is a
``tokenizers`` word-level model wrapped in ``PreTrainedTokenizerFast``, so both save and
load with ``save_pretrained`` / ``from_pretrained``.

Tokenizer design: every printable ASCII character is a token, and so is each word a task
declares (with and without a leading space). A regex pre-tokenizer cuts text into known
words (when followed by a non-letter) or single characters, so numbers are always
spelled digit by digit, any ASCII text round-trips exactly, and task prompts stay short
(training cost on a CPU grows with sequence length).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, closest_match

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "SPECIAL_TOKENS",
    "ModelSpec",
    "build_model",
    "build_tokenizer",
    "load_pretrained",
]

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)

#: bounds of the tiny model (planned before anything is allocated): 50 M decoder
#: parameters train with Adam in about 1 GB; a larger model is not what this trainer is for
MAX_PARAMETERS = 50_000_000
_MAX_SIZE = {"hidden_size": 16_384, "num_layers": 256, "num_heads": 1_024,
             "num_kv_heads": 1_024, "intermediate_size": 65_536, "max_positions": 1_048_576}
_CHARS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]  # 95 printable + "\n"


def build_tokenizer(words: Sequence[str] = ()) -> PreTrainedTokenizerBase:
    """A character-level tokenizer with whole-word tokens for ``words``.

    Token ids: ``<pad>`` 0, ``<eos>`` 1, ``<unk>`` 2, then the ASCII characters, then each
    word and its space-prefixed form. Characters outside printable ASCII map to ``<unk>``.
    Deterministic: the same ``words`` give the same ids.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    clean = sorted({w for w in words if w and re.fullmatch(r"[!-~]+", w) and len(w) > 1})
    vocab: dict[str, int] = {}
    for token in (*SPECIAL_TOKENS, *_CHARS, *clean, *(" " + w for w in clean)):
        vocab.setdefault(token, len(vocab))
    # Longest words first so that "apples" wins over "apple"; a word must not run on into
    # more letters ("has" does not match inside "hasty").
    pieces = [r"[\s\S]"]
    if clean:
        alternatives = "|".join(re.escape(w) for w in sorted(clean, key=len, reverse=True))
        pieces.insert(0, rf" ?(?:{alternatives})(?![A-Za-z])")
    backend = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("|".join(pieces)), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, eos_token=EOS, unk_token=UNK,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.padding_side = "left"  # batched generation appends on the right
    return tokenizer


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
        names = {f.name for f in fields(cls)}
        for name in params:
            if name not in names:
                close = closest_match(name, sorted(names))
                hint = f" (did you mean {close!r}?)" if close else ""
                raise InputError(f"unknown parameter `{key}.{name}`{hint}; "
                                 f"accepted: {', '.join(sorted(names))}.")
        for name, value in params.items():
            if name == "rope_theta":
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not 0 < value < math.inf:
                    raise InputError(f"`{key}.{name}` must be a positive number, got {value!r}.")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"`{key}.{name}` must be a positive integer, got {value!r}.")
            elif value > _MAX_SIZE[name]:
                raise InputError(f"`{key}.{name}` must be at most {_MAX_SIZE[name]:,}, "
                                 f"got {value!r}.")
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
    including the tiny Qwen2 of this module. The model is returned in eval mode on the CPU.
    """
    from transformers import AutoModelForCausalLM

    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise InputError(f"`{key}` must be a directory with a saved model (config.json), "
                         f"got {str(path)!r}.")
    try:
        with _quiet_transformers():
            tokenizer = _load_tokenizer(directory)
            model = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"`{key}`: cannot load a model from {str(path)!r}: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


def _load_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    # AutoTokenizer picks the tokenizer class from the model type (qwen2 -> Qwen2Tokenizer,
    # whose byte-level pre-tokenizer would replace ours); a tokenizer saved as a plain
    # tokenizers backend is therefore loaded as exactly that.
    config_file = directory / "tokenizer_config.json"
    saved_class = None
    if config_file.is_file():
        import json

        saved_class = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
    if saved_class in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return PreTrainedTokenizerFast.from_pretrained(directory, local_files_only=True)
    return AutoTokenizer.from_pretrained(directory, local_files_only=True)


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
