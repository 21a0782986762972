"""The forward hooks an :class:`~robuststats.engine._install.Installation` puts on a model:
decoder layers and their children (current layer, checkpoint recompute), norm and
activation modules (their output is the op), the parents of weight-carrying modules (which
must then be reached), and the modules outside the decoder layers (the path that functional
ops there are booked under)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from robuststats.engine._autograd import BackwardNoise
from robuststats.engine._model_map import OUTSIDE
from robuststats.engine._streams import in_backward

if TYPE_CHECKING:
    from robuststats.engine._install import Installation

__all__ = ["act_post", "act_pre", "child_post", "child_pre", "layer_pre", "norm_post",
           "norm_pre", "parent_pre", "path_post", "path_pre"]


def layer_pre(inst: Installation, index: int) -> Any:
    def hook(module: nn.Module, args: Any) -> None:
        s = inst.active()
        if s is not None:
            s.layer_enter(index, module)

    return hook


def child_pre(inst: Installation, index: int) -> Any:
    def hook(module: nn.Module, args: Any) -> None:
        s = inst.active()
        if s is None or not in_backward():
            return
        s.child_enter(index)
        # the autograd engine runs a recompute without the caller's TorchFunctionMode:
        # push the session's mode around each child so functional ops are reached again
        mode = s.mode
        if mode is not None:
            torch._C._push_on_torch_function_stack(mode)
            pushed = getattr(inst.tls, "pushed", None)
            if pushed is None:
                pushed = inst.tls.pushed = []
            pushed.append(id(module))

    return hook


def child_post(inst: Installation) -> Any:
    def hook(module: nn.Module, args: Any, output: Any) -> None:
        pushed = getattr(inst.tls, "pushed", None)
        if pushed and pushed[-1] == id(module):
            pushed.pop()
            torch._C._pop_torch_function_stack()

    return hook


# ``site(session)`` → the (layer, name) an op call is booked under
Site = Callable[[Any], tuple[int, str]]


def _input_noise(inst: Installation, op: str, site: Site) -> Any:
    """Pre-hook: backward noise on the gradient of the module's input."""
    def hook(module: nn.Module, args: Any) -> Any:
        s = inst.active()
        if s is None or not args or not isinstance(args[0], torch.Tensor):
            return None
        layer, name = site(s)
        _, bs = s.scales(op, layer, name)
        if bs > 0.0 and torch.is_grad_enabled() and args[0].requires_grad:
            return (BackwardNoise.apply(args[0], s, layer, op, bs), *args[1:])
        return None

    return hook


def _output_noise(inst: Installation, op: str, site: Site) -> Any:
    """Post-hook: forward noise on the module's output."""
    def hook(module: nn.Module, args: Any, output: Any) -> Any:
        s = inst.active()
        if s is None or not isinstance(output, torch.Tensor):
            return None
        layer, name = site(s)
        fs, _ = s.scales(op, layer, name)
        if fs > 0.0:
            return s.forward_noise(output, layer, op, fs)
        return None

    return hook


def norm_pre(inst: Installation, op: str, layer: int, name: str) -> Any:
    return _input_noise(inst, op, lambda s: (layer, name))


def norm_post(inst: Installation, op: str, layer: int, name: str) -> Any:
    return _output_noise(inst, op, lambda s: (layer, name))


def parent_pre(inst: Installation, pid: int) -> Any:
    # a forward of a module whose children carry weights: each of those children must be
    # reached (verification names the ones that were not)
    def hook(module: nn.Module, args: Any) -> None:
        s = inst.active()
        if s is not None and not in_backward():
            s.parents_ran.add(pid)

    return hook


def _act_site(inst: Installation, s: Any, layer: int, name: str) -> tuple[int, str]:
    """Where an activation call is booked: its module's layer and name; a module outside
    the decoder layers (one activation shared by every block of a plain model) called
    while a layer runs belongs to that layer, as its functional call did."""
    if layer == OUTSIDE:
        current = s.current_layer()
        if current is not None and current != OUTSIDE:
            return current, inst.map.layer_path(current)
    return layer, name


def act_pre(inst: Installation, op: str, layer: int, name: str) -> Any:
    pre = _input_noise(inst, op, lambda s: _act_site(inst, s, layer, name))

    def hook(module: nn.Module, args: Any) -> Any:
        inst.tls.in_act = getattr(inst.tls, "in_act", 0) + 1
        return pre(module, args)

    return hook


def act_post(inst: Installation, op: str, layer: int, name: str) -> Any:
    post = _output_noise(inst, op, lambda s: _act_site(inst, s, layer, name))

    def hook(module: nn.Module, args: Any, output: Any) -> Any:
        inst.tls.in_act = max(getattr(inst.tls, "in_act", 1) - 1, 0)
        return post(module, args, output)

    return hook


def path_pre(inst: Installation, name: str) -> Any:
    def hook(module: nn.Module, args: Any) -> None:
        paths = getattr(inst.tls, "paths", None)
        if paths is None:
            paths = inst.tls.paths = []
        paths.append(name)

    return hook


def path_post(inst: Installation) -> Any:
    def hook(module: nn.Module, args: Any, output: Any) -> None:
        paths = getattr(inst.tls, "paths", None)
        if paths:
            paths.pop()

    return hook
