"""Write an msprobe dump of a tiny Qwen2, Llama or GPT-2 (built from a transformers config) on the
CPU.

Run as a script, one dump per process (msprobe's debugger is a process-wide singleton):
``python msprobe_dump.py OUT --task tensor --dtype bfloat16 --layers 2 --items-seed 0
--passes 1 --model llama --attn eager --level mix``. The model's weights come from seed 0
whatever the dtype, attention implementation or level, so two dumps differ only in what the
flags change.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--task", default="tensor", choices=("tensor", "statistics"))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--intermediate", type=int, default=None, help="default 2 * hidden")
    p.add_argument("--items-seed", type=int, default=0)
    p.add_argument("--passes", type=int, default=1)
    p.add_argument("--model", default="qwen2", choices=("qwen2", "llama", "gpt2"))
    p.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    p.add_argument("--level", default="L0", choices=("L0", "L1", "mix"))
    p.add_argument("--steps", type=int, default=1, help="steps dumped (step0, step1, ...)")
    a = p.parse_args()

    import torch
    from msprobe.pytorch import PrecisionDebugger
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(0)
    shape = {"vocab_size": 64, "hidden_size": a.hidden,
             "intermediate_size": a.intermediate or 2 * a.hidden,
             "num_hidden_layers": a.layers, "num_attention_heads": 4,
             "num_key_value_heads": 2, "max_position_embeddings": 64,
             "tie_word_embeddings": False}
    if a.model == "gpt2":  # Conv1D projections, decoder blocks in ``h``
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=a.hidden, n_layer=a.layers,
                                           n_head=4, n_positions=64,
                                           attn_implementation=a.attn))
    elif a.model == "llama":
        model = LlamaForCausalLM(LlamaConfig(**shape, attn_implementation=a.attn))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**shape, attn_implementation=a.attn))
    model = model.eval().to(getattr(torch, a.dtype))
    gen = torch.Generator().manual_seed(a.items_seed)
    batches = [torch.randint(0, 64, (6, 7), generator=gen) for _ in range(a.passes)]
    config = f"{a.out}.config.json"
    with open(config, "w") as fh:
        json.dump({"task": a.task, "dump_path": a.out, "rank": [], "step": [],
                   "level": a.level,
                   a.task: {"scope": [], "list": [], "data_mode": ["forward"]}}, fh)
    debugger = PrecisionDebugger(config_path=config)
    for _ in range(a.steps):
        debugger.start(model)
        with torch.no_grad():
            for ids in batches:
                model(input_ids=ids)
        debugger.stop()
        debugger.step()


if __name__ == "__main__":
    main()
