"""Cost at the users' scale: real-size checkpoints, side by side with clean, as one table.

Builds random-init checkpoints with the real configs of Qwen2.5-0.5B, Qwen2.5-1.5B and a
Llama-family model (TinyLlama-1.1B's shapes), writes each with ``save_pretrained`` (and the
package's byte-level tokenizer: token ids stay far below the vocabulary, which changes
nothing in the cost of a forward pass), loads it back with the package's loader, and
measures, per (config, layers, items):

- ``eval``: a study cell, greedy generation with the KV cache (``models.evaluate``), clean
  and under relative Gaussian noise 0.05 on the matmuls: items/s and noisy / clean;
- ``forward``: one forward pass over the items, clean and noisy: noisy / clean (the
  engine's overhead at that width);
- ``capture``: ``divergence.capture_run`` (one pass with the sketch written to disk) /
  one clean forward pass;
- ``fit``: ``divergence.fit_noise`` with ``places=layer`` on the residual stream of every
  layer, from a planted divergence: its seconds / one clean forward pass, beside the
  ``2 + 2L`` noisy passes it simulates and the clean passes it adds;
- peak memory of each step, the model included (CPU: resident set, sampled every 5 ms;
  CUDA: ``max_memory_allocated``). Captures and fits run 8 items per batch whatever the
  item count, so their peak should not grow with items (memory bounded by one batch).

Variants are interleaved repeat by repeat (medians), so a shared machine's load moves both
sides alike; the ratios are the result, the seconds are this machine's. Depth and item
count are given twice (``--layers 2,4 --items 8,16``) to show how each cost grows; the
widths are always the real ones. ``--quick`` is a check of the script (tiny widths).

    python benchmarks/scale.py                         # CPU, 3 configs, layers 2,4, items 4,8
    python benchmarks/scale.py --device cuda --dtype bfloat16 --layers full --items 32,64
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the real shapes (hidden, intermediate, heads, KV heads, layers, vocabulary, tied)
CONFIGS = {
    "qwen2.5-0.5b": ("qwen2", 896, 4864, 14, 2, 24, 151936, True),
    "qwen2.5-1.5b": ("qwen2", 1536, 8960, 12, 2, 28, 151936, True),
    "llama-1.1b": ("llama", 2048, 5632, 32, 4, 22, 32000, False),
}
#: --quick: the same architectures at toy widths
QUICK = {
    "qwen2.5-0.5b": ("qwen2", 64, 128, 4, 2, 24, 512, True),
    "llama-1.1b": ("llama", 64, 128, 4, 2, 22, 512, False),
}
NOISE = 0.05


def build(name: str, shape: tuple, layers: int, tokenizer, path: Path,
          device: str = "cpu") -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    arch, hidden, inter, heads, kv, _, vocab, tied = shape
    kind = Qwen2Config if arch == "qwen2" else LlamaConfig
    cfg = kind(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
               num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
               max_position_embeddings=4096, tie_word_embeddings=tied,
               pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
               bos_token_id=tokenizer.bos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        with torch.device(device):  # a GPU draws 1.5B initial weights in a blink
            model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    del model


class Peak:
    """Peak memory while inside, model included (CPU: the resident set sampled in a thread;
    CUDA: the allocator's peak). Absolute: an allocator keeps what it freed, so a level
    "above entry" would read 0 after a warm-up."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.peak = device, 0

    def __enter__(self) -> Peak:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        import psutil

        proc = psutil.Process()
        self.top = proc.memory_info().rss
        self.stop = threading.Event()

        def sample() -> None:
            while not self.stop.is_set():
                self.top = max(self.top, proc.memory_info().rss)
                time.sleep(0.005)
        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        else:
            self.stop.set()
            self.thread.join()
            self.peak = self.top


def timed(fn: Callable[[], object], device: torch.device) -> tuple[float, int]:
    """Seconds and peak memory (bytes) of one call."""
    with Peak(device) as peak:
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - t0
    return seconds, peak.peak


def interleaved(variants: dict[str, Callable[[], object]], repeats: int,
                device: torch.device) -> dict[str, tuple[float, int]]:
    """Median seconds and largest peak of each variant, interleaved repeat by repeat, after
    one untimed warm-up call each."""
    for fn in variants.values():
        fn()
    got: dict[str, list[tuple[float, int]]] = {k: [] for k in variants}
    for _ in range(repeats):
        for k, fn in variants.items():
            got[k].append(timed(fn, device))
    return {k: (statistics.median(s for s, _ in v), max(m for _, m in v))
            for k, v in got.items()}


def measure(name: str, shape: tuple, layers: int, n_items: int, args: argparse.Namespace,
            work: Path) -> dict[str, object]:
    from robuststats.divergence import capture_run, compare_runs, fit_noise
    from robuststats.engine import NoiseSpec, inject
    from robuststats.models.evaluate import evaluate
    from robuststats.models.model import build_tokenizer, load_pretrained
    from robuststats.models.tasks import get_task
    from robuststats.models.trainer import TrainedModel

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    task = get_task("arithmetic", n_items=max(args.items), n_train=8, seed=0)
    items = task.items("test")[:n_items]
    texts = [it.prompt + it.solution for it in items]
    path = work / f"{name}-{layers}"
    tokenizer = build_tokenizer(task.vocabulary())
    if not path.exists():
        build(name, shape, layers, tokenizer, path, args.device)
    t0 = time.perf_counter()
    model, tokenizer = load_pretrained(str(path), key="scale")
    load_s = time.perf_counter() - t0
    model = model.to(device=device, dtype=dtype).eval()
    trained = TrainedModel(model=model, tokenizer=tokenizer, info={})
    spec = NoiseSpec(scale=NOISE, kind="relative_gaussian", ops="matmul_only",
                     phases="forward", seed=1)
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    enc = {k: v.to(device) for k, v in enc.items()}

    def forward() -> None:
        with torch.no_grad():
            model(**enc, use_cache=False)

    def noisy_forward() -> None:
        with inject(model, spec):
            forward()

    cell = {"clean": lambda: evaluate(trained, task, items, batch_size=n_items,
                                      max_new_tokens=args.new_tokens),
            "noisy": lambda: evaluate(trained, task, items, noise=spec, noise_seed=1,
                                      batch_size=n_items, max_new_tokens=args.new_tokens)}
    ev = interleaved(cell, args.repeats, device)
    fw = interleaved({"clean": forward, "noisy": noisy_forward}, args.repeats, device)
    cond = {"name": "ref", "dtype": args.dtype, "device": args.device}
    cap_file = work / "capture.npz"
    cap_s, cap_mem = timed(lambda: capture_run(model, tokenizer, texts, cap_file,
                                               condition=cond, batch_size=8), device)
    planted = {"name": "planted", "dtype": args.dtype, "device": args.device, "noise_seed": 7,
               "noise": {"scale": 0.02, "kind": "relative_gaussian", "ops": "matmul_only"}}
    div = compare_runs(model, tokenizer, texts, reference=cond, candidate=planted,
                       modules=["residual"], local=False, batch_size=n_items)
    box: dict[str, object] = {}
    fit_s, fit_mem = timed(lambda: box.update(fit=fit_noise(
        model, tokenizer, texts, div, places="layer", n_resamples=200, batch_size=8,
        device=args.device)), device)
    fit = box["fit"]
    clean_fw = fw["clean"][0]
    row = {
        "config": name, "layers": layers, "items": n_items, "device": args.device,
        "dtype": args.dtype, "load_s": load_s,
        "eval_items_per_s_clean": n_items / ev["clean"][0],
        "eval_items_per_s_noisy": n_items / ev["noisy"][0],
        "eval_ratio": ev["noisy"][0] / ev["clean"][0],
        "forward_s": clean_fw, "forward_ratio": fw["noisy"][0] / clean_fw,
        "capture_s": cap_s, "fit_s": fit_s, "capture_over_forward": cap_s / clean_fw,
        "fit_over_forward": fit_s / clean_fw, "fit_aim": 2 + 2 * layers,
        "fit_passes": fit.settings["forward_passes"],
        "fit_verdict": fit.verdict,
        "mem_eval_mb": max(ev["clean"][1], ev["noisy"][1]) / 2**20,
        "mem_forward_mb": fw["clean"][1] / 2**20, "mem_forward_noisy_mb": fw["noisy"][1] / 2**20,
        "mem_capture_mb": cap_mem / 2**20, "mem_fit_mb": fit_mem / 2**20,
    }
    return row


COLUMNS = [("config", "{}"), ("layers", "{}"), ("items", "{}"),
           ("eval_items_per_s_clean", "{:.2f}"), ("eval_items_per_s_noisy", "{:.2f}"),
           ("eval_ratio", "{:.3f}"), ("forward_s", "{:.3f}"), ("forward_ratio", "{:.3f}"),
           ("capture_s", "{:.2f}"), ("fit_s", "{:.1f}"),
           ("capture_over_forward", "{:.2f}"), ("fit_over_forward", "{:.1f}"),
           ("fit_aim", "{}"), ("fit_passes", "{}"), ("mem_forward_mb", "{:.0f}"),
           ("mem_forward_noisy_mb", "{:.0f}"), ("mem_eval_mb", "{:.0f}"),
           ("mem_capture_mb", "{:.0f}"), ("mem_fit_mb", "{:.0f}")]


def table(rows: list[dict[str, object]]) -> str:
    head = "| " + " | ".join(c for c, _ in COLUMNS) + " |"
    rule = "|" + "---|" * len(COLUMNS)
    body = ["| " + " | ".join(f.format(r[c]) for c, f in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names")
    p.add_argument("--layers", default="2,4",
                   help="decoder layers to build, comma-separated, or 'full' (the real depth)")
    p.add_argument("--items", default="4,8", help="items per cell, comma-separated")
    p.add_argument("--new-tokens", type=int, default=16, help="greedy tokens per item")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=None, help="torch threads (CPU)")
    p.add_argument("--quick", action="store_true", help="toy widths: a check of the script")
    p.add_argument("--out", type=Path, help="also write the table (markdown) here")
    p.add_argument("--save", type=Path, metavar="DIR",
                   help="only write the first config's checkpoint (random init, "
                        "save_pretrained, with the tokenizer) to DIR and exit")
    args = p.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.items = [int(x) for x in args.items.split(",")]
    shapes = QUICK if args.quick else CONFIGS
    names = [n for n in args.configs.split(",") if n in shapes]
    if args.save is not None:
        from robuststats.models.model import build_tokenizer
        from robuststats.models.tasks import get_task

        shape = shapes[names[0]]
        layers = shape[5] if args.layers == "full" else int(args.layers.split(",")[0])
        tok = build_tokenizer(get_task("arithmetic", n_items=8, n_train=8, seed=0).vocabulary())
        build(names[0], shape, layers, tok, args.save, args.device)
        print(f"scale: wrote {names[0]} ({layers} layers) to {args.save}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="rs-scale-") as tmp:
        for name in names:
            depths = [shapes[name][5]] if args.layers == "full" else \
                [int(x) for x in args.layers.split(",")]
            for layers in depths:
                for n in args.items:
                    row = measure(name, shapes[name], layers, n, args, Path(tmp))
                    rows.append(row)
                    gc.collect()  # the model of that measurement, before the next one
                    if args.device != "cpu":
                        torch.cuda.empty_cache()
                    print(f"scale: {name} L={layers} n={n}: eval {row['eval_ratio']:.3f}x, "
                          f"forward {row['forward_ratio']:.3f}x, capture "
                          f"{row['capture_over_forward']:.2f} fwd, fit "
                          f"{row['fit_over_forward']:.1f} fwd (aim {row['fit_aim']})",
                          flush=True)
    import os

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = (f"device {args.device} ({torch.cuda.get_device_name(0) if args.device != 'cpu' else 'CPU'}),"
            f" {args.dtype}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
            f"load average {load:.2f} at the end, {args.repeats} interleaved repeats, "
            f"{args.new_tokens} new tokens per item\n\n" + table(rows) + "\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
