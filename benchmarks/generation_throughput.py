"""Evaluation throughput (items/s) of batched greedy generation on a CPU, side by side.

Two measurements, each timed in one process with interleaved repeats (machine-load drift
hits every variant alike), medians reported with ratios:

1. **Stopping rows**: Qwen2-shaped models at two widths whose completions end (EOS) after
   8 to 128 tokens, set by the prompt (``VariableLength``: chain-of-thought answers vary
   that much), prompts of 40 to 239 characters: ``previous`` is the loop before rows left
   the batch (prompts in input order, every row carried to the longest completion of its
   batch); ``sorted + drop`` is :func:`robuststats.models.generation.generate_greedy`
   (prompts in order of length, finished rows leave the batch with their KV cache). Both
   give the same completions (checked).
2. **Clean vs noisy** on Qwen2-shaped models at two widths (random weights, fixed-length
   completions: every row generates ``--new-tokens`` tokens): ``clean`` against
   ``relative_gaussian`` 5 % on ``matmul_only`` (the engine's default evaluation noise),
   through ``robuststats.models.evaluate``'s path (``inject`` around the generation).

Run: ``python benchmarks/generation_throughput.py`` (``--quick`` for a smoke run). Threads
default to 1 (one per study worker, as the executor runs them).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.models.generation import generate_greedy
from robuststats.models.model import build_tokenizer


def previous_generate(model, tokenizer, prompts, *, max_new_tokens, batch_size):
    """The loop before this change: input order, finished rows stay in the batch."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    texts = []
    with torch.inference_mode():
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(list(prompts[start:start + batch_size]), padding=True,
                            return_tensors="pt", add_special_tokens=False)
            ids, mask = enc["input_ids"], enc["attention_mask"]
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                        logits_to_keep=1)
            n = ids.shape[0]
            gen = torch.full((n, max_new_tokens), pad, dtype=torch.long)
            done = torch.zeros(n, dtype=torch.bool)
            nxt = pos[:, -1:] + 1
            for step in range(max_new_tokens):
                tok = out.logits[:, -1, :].argmax(-1)
                tok = torch.where(done, torch.full_like(tok, pad), tok)
                gen[:, step] = tok
                done |= tok == eos
                if bool(done.all()) or step == max_new_tokens - 1:
                    break
                mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype)], 1)
                out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=nxt,
                            past_key_values=out.past_key_values, use_cache=True,
                            logits_to_keep=1)
                nxt = nxt + 1
            for row in gen.tolist():
                row = row[: row.index(eos)] if eos in row else row
                texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts


def timed(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


class VariableLength(torch.nn.Module):
    """A causal LM whose completions end (EOS) after a length set by the prompt's length:
    ``8 + (37 · prompt tokens) mod 121`` tokens, 8 to 128, like the spread of chain-of-thought
    answers. A row's prompt length and step follow from its attention mask (one column is
    appended per step); everything else is the wrapped model's."""

    def __init__(self, model: torch.nn.Module, eos_id: int) -> None:
        super().__init__()
        self.inner, self.eos_id = model, eos_id
        self.generation_config = model.generation_config
        self.generation_config.eos_token_id = None
        self.row_tokens = 0  # tokens fed through the model, prefill and decode

    @property
    def device(self) -> torch.device:
        return self.inner.device

    def forward(self, input_ids, attention_mask, position_ids, **kwargs):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, **kwargs)
        self.row_tokens += input_ids.numel()
        if input_ids.shape[1] > 1:  # prefill: every later mask is this one plus a column a step
            self._width0 = attention_mask.shape[1]
        appended = attention_mask.shape[1] - self._width0
        prompt = attention_mask.sum(-1) - appended  # survives rows leaving the batch
        target = 8 + (37 * prompt) % 121
        ends = (appended + 1 >= target)
        out.logits[:, -1, self.eos_id] = torch.where(ends, 1e4, -1e4).to(out.logits.dtype)
        return out


def stopping_rows(hiddens: list[int], layers: int, n_items: int, batch: int,
                  repeats: int) -> None:
    from robuststats.models.tasks import get_task

    task = get_task("arithmetic", n_items=max(n_items, 100), n_steps=3, seed=1)
    tok = build_tokenizer(task.vocabulary())
    # prompts of many different lengths (40 to 239 characters of task text), so that the
    # completion lengths they set spread over 8-128 tokens within every batch
    text = " ".join(i.prompt for i in task.items("test"))
    prompts = [text[k * 7: k * 7 + 40 + (k * 53) % 200] for k in range(n_items)]
    print(f"\n1. stopping rows: Qwen2-shaped, {layers} layers, random weights, completions end "
          f"after 8-128 tokens (set by the prompt), {n_items} items, batch {batch}, "
          f"{repeats} repeats")
    budget = 160
    print(f"{'hidden':>7}{'previous items/s':>18}{'sorted + drop items/s':>23}{'speed-up':>10}"
          f"{'tokens prev':>12}{'tokens new':>12}")
    for hidden in hiddens:
        model = VariableLength(qwen2(hidden, layers, len(tok)), tok.eos_token_id)

        def new(model=model):
            return generate_greedy(model, tok, prompts, max_new_tokens=budget,
                                   batch_size=batch)

        def old(model=model):
            return previous_generate(model, tok, prompts, max_new_tokens=budget,
                                     batch_size=batch)

        model.row_tokens = 0
        completions = old()
        work_old, model.row_tokens = model.row_tokens, 0
        assert new() == completions, "the two loops must give the same completions"
        work_new = model.row_tokens
        t = timed({"previous": old, "new": new}, repeats)
        print(f"{hidden:>7}{n_items / t['previous']:>18.2f}{n_items / t['new']:>23.2f}"
              f"{t['previous'] / t['new']:>10.2f}{work_old:>12,}{work_new:>12,}")


def qwen2(hidden: int, layers: int, vocab: int) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden,
                         intermediate_size=int(hidden * 5.4),  # Qwen2.5-0.5B: 896 → 4864
                         num_hidden_layers=layers, num_attention_heads=hidden // 64,
                         num_key_value_heads=max(hidden // 448, 1), tie_word_embeddings=True,
                         attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config).eval()


def clean_vs_noisy(hiddens: list[int], layers: int, n_items: int, batch: int,
                   new_tokens: int, repeats: int) -> None:
    from robuststats.models.tasks import get_task

    task = get_task("arithmetic", n_items=n_items, n_steps=3, seed=1)
    tok = build_tokenizer(task.vocabulary())
    prompts = [i.prompt for i in task.items("test")]
    spec = NoiseSpec(scale=0.05, kind="relative_gaussian", ops="matmul_only",
                     phases="forward", seed=0)
    print(f"\n2. clean vs noisy (relative_gaussian 5 %, matmul_only): Qwen2-shaped, {layers} "
          f"layers, random weights, {len(prompts)} items, batch {batch}, {new_tokens} new "
          f"tokens per item, {repeats} repeats")
    print(f"{'hidden':>7}{'params':>12}{'clean items/s':>15}{'noisy items/s':>15}"
          f"{'noisy/clean time':>18}")
    for hidden in hiddens:
        model = qwen2(hidden, layers, len(tok))
        # every row runs the full budget (the cost of a long answer): the EOS token's
        # (tied) embedding is zero, so its logit is 0 and never the argmax of a random model
        model.generation_config.eos_token_id = None
        with torch.no_grad():
            model.model.embed_tokens.weight[tok.eos_token_id].zero_()

        def run(noisy: bool, model: torch.nn.Module = model) -> None:
            with inject(model, spec, verify=True) if noisy else _nothing():
                generate_greedy(model, tok, prompts, max_new_tokens=new_tokens,
                                batch_size=batch)

        t = timed({"clean": lambda: run(False), "noisy": lambda: run(True)}, repeats)
        params = sum(p.numel() for p in model.parameters())
        print(f"{hidden:>7}{params:>12,}{len(prompts) / t['clean']:>15.1f}"
              f"{len(prompts) / t['noisy']:>15.1f}{t['noisy'] / t['clean']:>18.2f}")


def _nothing():
    from contextlib import nullcontext

    return nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.items, args.repeats, args.hidden, args.new_tokens = 32, 1, [128], 8
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    stopping_rows(args.hidden, args.layers, args.items, args.batch, args.repeats)
    clean_vs_noisy(args.hidden, args.layers, args.items, args.batch, args.new_tokens,
                   args.repeats)


if __name__ == "__main__":
    main()
