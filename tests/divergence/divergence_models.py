"""Tiny causal LMs of three architectures, built from transformers configs, and texts.

Imported by the tests of this directory as ``divergence_models``.
"""

from __future__ import annotations


def tiny(arch: str, *, n_layers: int = 4, seed: int = 0, gain: float = 3.0):
    """(model, tokenizer, texts): a randomly initialised tiny causal LM of ``arch``
    (``qwen2``, ``llama``, ``gpt2``) with the package's byte-level tokenizer and 12 texts of
    the arithmetic task (prompt and worked solution). Matrix weights are scaled by ``gain``
    so that activations depend on the input (as in the probe's tests)."""
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    from robuststats.models.model import build_model, build_tokenizer
    from robuststats.models.tasks import get_task

    task = get_task("arithmetic", n_items=12, n_train=12, seed=0)
    tok = build_tokenizer(task.vocabulary())
    texts = [it.prompt + it.solution for it in task.items("test")]
    if arch == "qwen2":
        model = build_model(tok, {"num_layers": n_layers}, seed=seed)
    else:
        if arch == "llama":
            cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                              num_hidden_layers=n_layers, num_attention_heads=4,
                              num_key_value_heads=2, max_position_embeddings=256,
                              pad_token_id=tok.pad_token_id)
        elif arch == "gpt2":
            cfg = GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=n_layers, n_head=4,
                             n_positions=256, pad_token_id=tok.pad_token_id)
        else:
            raise ValueError(arch)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(cfg)
        model.eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(gain)
    return model, tok, texts


def make_dumps(root, specs: dict[str, list[str]]) -> dict:
    """Write one msprobe dump per entry of ``specs`` (name -> arguments of
    ``msprobe_dump.py``) under ``root``, two at a time in their own processes (msprobe's
    hooks are process-wide); returns name -> dump directory."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    script = Path(__file__).with_name("msprobe_dump.py")

    def one(name: str) -> None:
        subprocess.run([sys.executable, str(script), str(Path(root) / name), *specs[name]],
                       check=True, capture_output=True, timeout=600)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, specs))
    return {name: Path(root) / name for name in specs}
