"""RMS relative error of each number format: output rounding beside input quantization.

For a product ``y = x·Wᵀ`` the table gives, per format and scale granularity:

- ``output``: the engine's output-rounding error model, ‖q(y) − y‖ / ‖y‖ (``kind=<format>``,
  ``target="output"``; per-tensor scales for fp8/int8, the format's blocks for MXFP4/NVFP4);
- ``x only``: ‖q(x) − x‖ / ‖x‖, the operand error of input quantization;
- ``W only``: the product error of weight-only quantization, ‖x·q(W)ᵀ − y‖ / ‖y‖ (W4A16);
- ``W and x``: the product error when both operands are quantized (W8A8 / W4A4),
  ‖q(x)·q(W)ᵀ − y‖ / ‖y‖, computed in float32 as ``target="inputs"`` does.

Two data sets: N(0, 1) activations (256 × 1024) with N(0, 1/1024) weights, and the inputs and
weights of every linear layer of a tiny Qwen2 (hidden 512, 4 layers, random initialisation
from its config: no trained checkpoint is reachable here) on 4 × 128 random tokens; the
Qwen2 figures pool all linears, √(Σ‖error‖² / Σ‖y‖²). Run:
``python benchmarks/quant_error.py`` (deterministic, seconds on a CPU).
"""

from __future__ import annotations

import torch

from robuststats.engine import fake_quantize, quantize

ROWS = [  # (format, granularity): the granularities input quantization offers
    ("fp8_e4m3", "tensor"), ("fp8_e4m3", "row"), ("fp8_e4m3", "block"),
    ("fp8_e5m2", "tensor"), ("fp8_e5m2", "row"),
    ("int8", "tensor"), ("int8", "row"),
    ("mxfp4", "block"), ("nvfp4", "block"),
]
#: output rounding exists per tensor (fp8, int8) and with the format's blocks (MX, NV)
OUTPUT_GRANULARITY = {"fp8_e4m3": "tensor", "fp8_e5m2": "tensor", "int8": "tensor",
                      "mxfp4": "block", "nvfp4": "block"}


def gaussian_pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 1024, generator=g)
    w = torch.randn(1024, 1024, generator=g) / 1024 ** 0.5
    return [(x, w)]


def qwen2_pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=4096, hidden_size=512, intermediate_size=1408,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                      max_position_embeddings=256)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).eval()
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def grab(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
        pairs.append((args[0].detach().reshape(-1, args[0].shape[-1]), module.weight.detach()))

    hooks = [m.register_forward_hook(grab) for m in model.modules()
             if isinstance(m, torch.nn.Linear)]
    ids = torch.randint(0, 4096, (4, 128), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    return pairs


def errors(pairs: list[tuple[torch.Tensor, torch.Tensor]], fmt: str, gran: str) -> dict[str, float]:
    acc = {k: [0.0, 0.0] for k in ("output", "x only", "W only", "W and x")}
    for x, w in pairs:
        y = x @ w.T
        qx = fake_quantize(x, fmt, granularity=gran)
        qw = fake_quantize(w, fmt, granularity=gran)
        parts = {
            "x only": (qx - x, x),
            "W only": (x @ qw.T - y, y),
            "W and x": (qx @ qw.T - y, y),
        }
        if OUTPUT_GRANULARITY[fmt] == gran:
            parts["output"] = (quantize(y, fmt) - y, y)
        for k, (e, ref) in parts.items():
            acc[k][0] += float(e.double().square().sum())
            acc[k][1] += float(ref.double().square().sum())
    return {k: (a / b) ** 0.5 if b else float("nan") for k, (a, b) in acc.items()}


def main() -> None:
    sets = {"N(0,1)": gaussian_pairs(), "tiny Qwen2": qwen2_pairs()}
    cols = ["output", "x only", "W only", "W and x"]
    head = "| format | scales | " + " | ".join(f"{s}: {c}" for s in sets for c in cols) + " |"
    print(head)
    print("|" + " --- |" * (2 + len(sets) * len(cols)))
    for fmt, gran in ROWS:
        cells = []
        for pairs in sets.values():
            e = errors(pairs, fmt, gran)
            cells += ["—" if e[c] != e[c] else f"{e[c]:.4f}" for c in cols]
        scales = {"tensor": "per tensor", "row": "per row", "block": "per block"}[gran]
        if fmt == "fp8_e4m3" and gran == "block":
            scales = "1×128 blocks"
        elif fmt == "mxfp4":
            scales = "32, E8M0"
        elif fmt == "nvfp4":
            scales = "16, E4M3 + fp32"
        print(f"| {fmt} | {scales} | " + " | ".join(cells) + " |")
    print("\nrelative_gaussian at scale s has RMS relative error s on every column's footing "
          "(5 % Gaussian: 0.05).")


if __name__ == "__main__":
    main()
