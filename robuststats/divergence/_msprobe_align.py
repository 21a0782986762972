"""Align the calls of two msprobe dumps made on two software stacks.

Two stacks call different operators for the same model (sdpa against eager attention, a fused
NPU kernel against its PyTorch composition), so two dumps are not aligned call by call. Each
forward call gets a key that names *what* it computes, not its position in the dump:

- a module call (levels L0 and mix): its module path and call index k
  (``Module.<path>.<Class>.forward.<k>``; the class is left out so a fused replacement of a
  module class still matches, with a note);
- an API call (levels L1 and mix): its scope, the API (``Functional.linear``), its caller
  (the innermost frame of the recorded call stack outside torch and transformers' wrappers:
  file name, function and source line, so ``q_proj`` and ``k_proj`` differ and a line number
  that moved between versions does not matter) and its ordinal among the calls with that
  scope, API and caller. The scope of a mix dump's call is its parent module call
  (``construct.json``); in an L1 dump it is the decoder layer, found from the call stack:
  the calls whose stack passes through the model's layer loop (a frame whose source line calls
  ``decoder_layer(``, ``layer(``, ``block(`` or ``layer_module(``) form one run per forward
  pass, and the run is the same call sequence repeated once per layer (the smallest period of
  the sequence of their stacks inside the loop), so call j of the run belongs to layer
  j // period. The last call of a layer (the residual addition in the transformers decoder
  layers) is the layer's output, the residual stream, when its shape is the hidden states'.

Keys held by both dumps are compared; the others are listed per side. Dumps are refused only
when no key is common or the models differ: layer count, hidden size, a module's parameter
shapes or an API call's input shapes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from robuststats.errors import InputError

__all__ = ["LAYER", "ONE_SIDE_COLUMNS", "Entry", "align", "check_pair", "index_calls",
           "one_side_table"]

#: columns of the table of calls only one dump holds
ONE_SIDE_COLUMNS = ["side", "site", "layer", "call", "caller", "n_calls", "shape", "dtype"]
_LOOP = re.compile(r"(?<![\w.])(?:decoder_layer|layer|block|layer_module)\s*\(")
_FRAME = re.compile(r"^File (?P<file>.*?), line (?P<line>\d+), in (?P<func>[^,]+),\s*(?P<src>.*)$",
                    re.S)
# frames of the framework itself, never the model's code that made the call
_WRAPPERS = ("/torch/", "/torch_npu/", "/transformers/utils/", "/transformers/modeling_layers",
             "/transformers/integrations/", "/msprobe/")
_MODULE_NAME = re.compile(r"^Module\.(?P<path>.+)\.[^.]+\.forward\.(?P<k>\d+)$")
#: a decoder layer's path: ``...layers.<i>``, ``h.<i>``, ``blocks.<i>``, then what is inside it
LAYER = re.compile(r"^(?P<prefix>.*?\b(?:layers|h|blocks|layer)\.(?P<i>\d+))(?:\.(?P<rest>.+))?$")


@dataclass(frozen=True)
class Entry:
    """One forward call of a dump with its alignment ``key``, ``site`` (module path, or
    scope and API), ``layer`` (−1 outside the decoder layers), observation index ``k``
    (module call or forward pass) and ``call`` (module class or API)."""

    key: tuple[Any, ...]
    site: str
    layer: int
    k: int
    call: str
    index: int  # position of the call in Dump.calls
    residual: bool = False
    scope: str = ""  # the module (or L1 decoder layer) the call is in
    caller: str = ""  # the model's source line that made an API call


def _frames(stack: Sequence[str]) -> list[tuple[str, str, str, str]]:
    out = []
    for text in stack:
        m = _FRAME.match(str(text))
        if m is not None:
            out.append((m.group("file"), m.group("line"), m.group("func"),
                        " ".join(m.group("src").split())))
    return out


def _caller(frames: list[tuple[str, str, str, str]]) -> tuple[str, str, str] | None:
    for file, _, func, src in frames:
        if not any(w in file.replace("\\", "/") for w in _WRAPPERS):
            return file.replace("\\", "/").rsplit("/", 1)[-1], func, src
    return None


def _loop_depth(frames: list[tuple[str, str, str, str]]) -> int | None:
    """Index (innermost first) of the frame that calls a decoder layer, or None."""
    for i, (_, _, _, src) in enumerate(frames):
        if _LOOP.search(src):
            return i
    return None


def _layer(site: str) -> int:
    m = LAYER.match(site)
    return -1 if m is None else int(m.group("i"))


def _period(seq: list[Any]) -> int:
    """The smallest p dividing len(seq) with seq = seq[:p] repeated."""
    n = len(seq)
    for p in range(1, n + 1):
        if n % p == 0 and all(seq[j] == seq[j % p] for j in range(n)):
            return p
    return n


def _api(call: Any) -> str:
    return call.site.rsplit(".", 1)[0]  # Functional.linear.3 -> Functional.linear


def _mix_scope(dump: Any, call: Any) -> tuple[str, int]:
    parent = dump.construct.get(call.name)
    m = _MODULE_NAME.match(parent) if isinstance(parent, str) else None
    return (m.group("path"), int(m.group("k"))) if m is not None else ("", 0)


def _l1_scopes(dump: Any, stacks: list[list[tuple[str, str, str, str]]]) \
        -> tuple[list[tuple[str, int, int]], list[bool], list[str]]:
    """(scope, pass, layer) of each call of an L1 dump, whether it ends its layer, notes."""
    n = len(dump.calls)
    depth = [_loop_depth(f) for f in stacks]
    out: list[tuple[str, int, int]] = [("", 0, -1)] * n
    last = [False] * n
    notes: list[str] = []
    runs, j = [], 0
    while j < n:  # runs of consecutive calls inside the layer loop
        if depth[j] is None:
            j += 1
            continue
        start = j
        while j < n and depth[j] is not None:
            j += 1
        runs.append((start, j))
    if not runs:
        if any(f for f in stacks):
            notes.append("the L1 dumps' call stacks pass through no layer loop: API calls "
                         "are not mapped to decoder layers")
        else:
            notes.append("an L1 dump without stack.json: API calls are not mapped to "
                         "decoder layers (dump with msprobe's stack collection)")
        return out, last, notes
    p, first_outside, in_pass = 0, None, False
    run_of = {s: (s, e) for s, e in runs}
    j = 0
    while j < n:
        if j in run_of:
            s, e = run_of[j]
            sig = [(_api(dump.calls[i]), tuple(stacks[i][:depth[i]])) for i in range(s, e)]
            per = _period(sig)
            for i in range(s, e):
                layer = (i - s) // per
                out[i] = (f"layers.{layer}", p, layer)
                last[i] = (i - s) % per == per - 1
            in_pass, j = True, e
            continue
        sig = (_api(dump.calls[j]), _caller(stacks[j]))
        if first_outside is None:
            first_outside = sig
        elif sig == first_outside and in_pass:  # the next forward pass begins
            p, in_pass = p + 1, False
        out[j] = ("", p, -1)
        j += 1
    return out, last, notes


def index_calls(dump: Any) -> tuple[list[Entry], list[str]]:
    """The :class:`Entry` of every forward call of ``dump`` (a ``_msprobe.Dump``), and
    notes on how API calls were placed."""
    stacks = [_frames(dump.stacks.get(c.name, ())) for c in dump.calls]
    has_api = any(not c.name.startswith("Module.") for c in dump.calls)
    notes: list[str] = []
    if has_api and dump.level == "L1":
        scopes, last, notes = _l1_scopes(dump, stacks)
    else:
        scopes, last = [], [False] * len(dump.calls)
        for c in dump.calls:
            scope, k = _mix_scope(dump, c) if not c.name.startswith("Module.") else ("", 0)
            scopes.append((scope, k, -1))
    entries: list[Entry] = []
    seen: Counter[tuple[Any, ...]] = Counter()
    ordinal: Counter[tuple[Any, ...]] = Counter()
    hidden: dict[tuple[str, int], Any] = {}
    for i, c in enumerate(dump.calls):
        if c.name.startswith("Module."):
            entries.append(Entry(("module", c.site, c.k), c.site, _layer(c.site), c.k, c.cls,
                                 i, scope=c.site))
            continue
        scope, k, layer = scopes[i]
        api = _api(c)
        caller = _caller(stacks[i])
        group = (scope, k, api, caller)
        key = ("api", *group, seen[group])
        seen[group] += 1
        j = ordinal[(scope, k, api)]
        ordinal[(scope, k, api)] += 1
        site = f"{scope}.{api}.{j}" if scope else f"{api}.{j}"
        hidden.setdefault((scope, k), c.inputs[0].get("shape") if c.inputs else None)
        residual = last[i] and layer >= 0 and c.output.get("shape") == hidden[(scope, k)]
        entries.append(Entry(key, scope if residual else site, _layer(site), k, api, i,
                             residual, scope, "" if caller is None else
                             f"{caller[0]} {caller[1]}: {caller[2]}"))
    return entries, notes


def _layers(dump: Any, entries: list[Entry]) -> tuple[int, Any]:
    """(layer count, hidden size) of a dump: from its decoder-layer modules, else from its
    L1 layers' residual calls; (0, None) when neither is known."""
    res = [(int(m.group("i")), dump.calls[e.index]) for e in entries
           if e.key[0] == "module" and (m := LAYER.match(e.site)) and m.group("rest") is None]
    if not res:
        res = [(e.layer, dump.calls[e.index]) for e in entries if e.residual]
    if not res:
        return 0, None
    shape = res[0][1].output.get("shape") or [None]
    return len({i for i, _ in res}), shape[-1]


def _differ(name: str, what: str) -> InputError:
    return InputError(f"`{name}`: the dumps differ in {what}; they cannot be compared.")


def align(a: Any, b: Any, name: str) -> tuple[list[tuple[Entry, Entry]], list[Entry],
                                               list[Entry], list[str]]:
    """The pairs of calls both dumps hold (in the reference's order), the calls only
    ``a`` and only ``b`` hold, and notes; refuses dumps of two models (module docstring)."""
    ea, notes = index_calls(a)
    eb, notes_b = index_calls(b)
    notes += [n for n in notes_b if n not in notes]
    by_key = {e.key: e for e in eb}
    pairs = [(x, by_key[x.key]) for x in ea if x.key in by_key]
    if not pairs:
        raise InputError(f"`{name}`: the dumps hold no call in common (levels {a.level} and "
                         f"{b.level}: another model, or dumps of different levels without a "
                         "common module); they cannot be compared.")
    (la, ha), (lb, hb) = _layers(a, ea), _layers(b, eb)
    if la and lb and la != lb:
        raise _differ(name, f"their layer count: {la} against {lb} (another model)")
    if ha is not None and hb is not None and ha != hb:
        raise _differ(name, f"their hidden size: {ha} against {hb} (another model)")
    common = {x.key for x, _ in pairs}
    classes = set()
    for x, y in pairs:
        ca, cb = a.calls[x.index], b.calls[y.index]
        for pname in sorted(set(ca.parameters) | set(cb.parameters)):
            pa, pb = ca.parameters.get(pname), cb.parameters.get(pname)
            sa = pa.get("shape") if isinstance(pa, dict) else None
            sb = pb.get("shape") if isinstance(pb, dict) else None
            if sa != sb:
                raise _differ(name, f"the model: parameter {pname!r} of {x.site!r} has "
                                    f"shape {sa} against {sb}")
        if x.key[0] == "api":
            sa, sb = ([r.get("shape") for r in c.inputs] for c in (ca, cb))
            if sa != sb:
                raise _differ(name, f"the model: the inputs of {ca.name!r} ({x.site}) have "
                                    f"shapes {sa} against {sb}")
        elif x.call != y.call:
            classes.add(f"{x.site} ({x.call} against {y.call})")
        if ca.output.get("shape") != cb.output.get("shape"):
            raise _differ(name, f"the output shape of {ca.name!r}: {ca.output.get('shape')} "
                                f"against {cb.output.get('shape')}")
    if classes:
        notes.append(f"{len(classes)} module(s) of another class on each side, compared by "
                     f"path: {', '.join(sorted(classes)[:3])}")
    pa, pb = (1 + max((e.k for e in es if e.layer >= 0), default=0) for es in (ea, eb))
    if pa != pb:
        notes.append(f"the reference dump holds {pa} forward pass(es), the candidate {pb}: "
                     f"the first {min(pa, pb)} are compared, the others listed as one side's")
    only_a = [x for x in ea if x.key not in common]
    only_b = [y for y in eb if y.key not in common]
    return pairs, only_a, only_b, notes


def one_side_table(only: dict[str, tuple[Any, list[Entry]]]) -> pd.DataFrame:
    """Per side, scope and call (API or module class) and caller, the calls one dump holds
    and the other does not: ``site`` (the module or decoder layer they are in, ``-`` outside
    every module), ``n_calls``, the first one's output ``shape`` and ``dtype``."""
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    counts: defaultdict[tuple[str, str, str, str], int] = defaultdict(int)
    for side, (dump, entries) in only.items():
        for e in entries:
            out = dump.calls[e.index].output
            key = (side, e.scope, e.call, e.caller)
            counts[key] += 1
            rows.setdefault(key, {
                "side": side, "site": e.scope or "-", "layer": _layer(e.scope or "-"),
                "call": e.call, "caller": e.caller,
                "shape": "x".join(str(s) for s in out.get("shape") or []),
                "dtype": str(out.get("dtype", "")).replace("torch.", "")})
    table = pd.DataFrame([{**r, "n_calls": counts[key]} for key, r in rows.items()],
                         columns=ONE_SIDE_COLUMNS)
    return table.astype({"layer": int, "n_calls": int})


def check_pair(a: Any, b: Any, name: str) -> tuple[list[Any], pd.DataFrame, list[str]]:
    """The pairs of calls both dumps hold, the table of calls only one holds and notes;
    refuses dumps of different models, steps, tasks or items."""
    # a dump's step is its directory's name (step<N>); a copied rank directory has none
    if a.step is not None and b.step is not None and a.step != b.step:
        raise _differ(name, f"their step: {a.step} against {b.step}")
    if a.task != b.task:
        raise _differ(name, f"their task: {a.task!r} against {b.task!r}")
    pairs, only_a, only_b, notes = align(a, b, name)
    if a.step is None or b.step is None:
        notes.append("the step of a dump is unknown (its path has no step<N> directory); "
                     "not checked")
    # the items: the first common call given integers (token ids) must get the same tensor
    for x, y in pairs:
        ca, cb = a.calls[x.index], b.calls[y.index]
        if not ca.inputs or not cb.inputs:
            continue
        ia, ib = ca.inputs[0], cb.inputs[0]
        if ia.get("shape") != ib.get("shape"):
            raise _differ(name, f"their items: the input of {ca.name!r} has shape "
                                f"{ia.get('shape')} against {ib.get('shape')}")
        if str(ia.get("dtype", "")).startswith(("torch.int", "torch.long")):
            if any(ia.get(k) != ib.get(k) for k in ("Max", "Min", "Mean", "Norm")):
                raise _differ(name, f"their items: the token ids given to {ca.name!r} "
                                    "differ (their Max/Min/Mean/Norm)")
        break
    for x, y in pairs:
        wa = (a.calls[x.index].parameters.get("weight") or {}).get("Norm")
        wb = (b.calls[y.index].parameters.get("weight") or {}).get("Norm")
        if isinstance(wa, (int, float)) and isinstance(wb, (int, float)) and wa > 0 \
                and abs(wb - wa) / wa > 1e-2:
            notes.append(f"the weights differ (norm of {x.site}.weight {wa:.6g} against "
                         f"{wb:.6g}): two checkpoints, or a conversion")
            break
    one_side = one_side_table({"reference": (a, only_a), "candidate": (b, only_b)})
    if len(one_side):
        notes.append(f"{int(one_side['n_calls'].sum())} call(s) in {len(one_side)} row(s) "
                     "are in one dump only (fused or functional calls of one stack, or "
                     "another level): listed in the one_side table, not compared")
    return pairs, one_side, notes
