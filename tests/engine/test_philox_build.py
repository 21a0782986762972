"""The ``philox`` kernel's build and threads: the per-user cache (reused, atomic under
concurrent builds), the refusal without a compiler, any thread count, and forked children."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from robuststats.engine import _philox
from robuststats.engine._philox import TILE, GeneratorUnavailableError, PhiloxStream


def test_build_is_cached_and_atomic_under_concurrent_builds(tmp_path, monkeypatch) -> None:
    # four builds at once into an empty cache: each compiles to its own temporary file and
    # renames it into place, so all name the same whole library and leave nothing else
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: _philox.build_library(tmp_path), range(4)))
    assert len(set(paths)) == 1 and paths[0].parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [paths[0].name]
    z = torch.empty(3 * TILE)
    _philox._Library(paths[0]).normal_(z, 7, 0)
    ref = torch.empty(3 * TILE)
    _philox.kernel().normal_(ref, 7, 0)
    assert torch.equal(z, ref)

    run, compiles = subprocess.run, []

    def counted(args, **kwargs):
        compiles.extend([args] if "--version" not in args else [])
        return run(args, **kwargs)

    monkeypatch.setattr(_philox.subprocess, "run", counted)
    assert _philox.build_library(tmp_path) == paths[0] and compiles == []  # from the cache
    other = tmp_path.parent / f"{tmp_path.name}-cc"
    other.symlink_to(_philox._compiler()[0])
    monkeypatch.setenv("CC", str(other))  # another compiler: another library
    assert _philox.build_library(tmp_path) != paths[0] and len(compiles) == 1


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROBUSTSTATS_CACHE_DIR", str(tmp_path / "rs"))
    assert _philox._cache_dir() == tmp_path / "rs"
    monkeypatch.delenv("ROBUSTSTATS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _philox._cache_dir() == tmp_path / "xdg" / "robuststats"


def test_no_compiler_is_one_clear_refusal(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROBUSTSTATS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setattr(_philox, "_KERNEL", _philox._Kernel())
    with pytest.raises(GeneratorUnavailableError,
                       match=r"^generator 'philox' needs its C kernel, which could not be built "
                             r"here \(C compiler 'no-such-cc' not found\); install a C compiler "
                             r"or use generator 'mt'\.$"):
        _philox.check_generator("philox")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_same_bits_for_one_to_four_threads(dtype) -> None:
    # uneven tile splits: 23 tiles and a partial one over 1, 2, 3 and 4 threads
    y0 = torch.randn(23 * TILE + 517, generator=torch.Generator().manual_seed(5)).to(dtype)
    y0[[3, 40, 5000, 9 * TILE + 1]] = torch.tensor([float("nan"), -float("nan"), float("inf"),
                                                    -float("inf")]).to(dtype)
    before = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3, 4):
            torch.set_num_threads(n)
            y = y0.clone()
            s = PhiloxStream(8).set_state({"position": 5 * TILE})
            norms = s.perturb_relative_(y, 0.05)
            draws = s.randn((17 * TILE + 3,), torch.float32)
            results.append((y.view(torch.int32 if dtype == torch.float32 else torch.int16),
                            norms.view(torch.int64), draws.view(torch.int32)))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))
    # a NaN norm is one fixed quiet NaN, whatever NaNs the sum met
    assert results[0][1].tolist() == [0x7FF8000000000000] * 2


def test_a_child_forked_after_a_two_thread_draw_draws_too() -> None:
    script = textwrap.dedent(f"""
        import multiprocessing as mp, sys, torch
        from robuststats.engine._philox import PhiloxStream

        def draw():
            torch.set_num_threads(2)
            return PhiloxStream(3).randn((64 * {TILE},), torch.float32)

        def child(expected):
            sys.exit(0 if torch.equal(draw(), expected) else 3)

        if __name__ == "__main__":
            expected = draw()  # the pool's threads are started in the parent
            p = mp.get_context("fork").Process(target=child, args=(expected,))
            p.start()
            p.join(60)
            if p.is_alive():
                p.kill()
                sys.exit(4)
            sys.exit(p.exitcode)
    """)
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ), timeout=240,
                          capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


@pytest.mark.parametrize("isa", ["portable", "avx2"])
def test_builds_for_other_instruction_sets_give_the_same_values(tmp_path, isa) -> None:
    # the kernel has an AVX-512 path for the Philox rounds and an F16C path for fp16; a CPU
    # without them compiles the portable loops, which must give bitwise the same numbers
    cc = _philox._compiler()[0]
    flags = [f for f in _philox._FLAGS if f != "-march=native"]
    arch = ["-march=x86-64"] if isa == "portable" else ["-march=haswell"]
    if os.uname().machine not in ("x86_64", "AMD64"):
        arch = []
    lib = tmp_path / f"philox_{isa}.so"
    subprocess.run([cc, *flags, *arch, "-o", str(lib), str(_philox._SOURCE), "-lm"], check=True,
                   capture_output=True, timeout=600)
    other, native = _philox._Library(lib), _philox.kernel()
    for key, offset, n in [(7, 0, 3 * TILE), (-(2**63), 2**64 - 2 * TILE, 2 * TILE + 5),
                           (2**40 + 3, 5 * TILE + 17, 1000)]:
        a, b = torch.empty(n), torch.empty(n)
        other.normal_(a, key, offset)
        native.normal_(b, key, offset)
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    for dtype, special in itertools.product((torch.float32, torch.bfloat16, torch.float16),
                                            (False, True)):
        y = torch.randn(2 * TILE + 9, generator=torch.Generator().manual_seed(5)).to(dtype)
        if special:
            y[3] = float("inf")
        outs = []
        for k in (other, native):
            out = torch.empty_like(y)
            outs.append((out, k.perturb_into(y, out, 11, 3 * TILE, 0.05)))
        (a, na), (b, nb) = outs
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        nan = a.isnan()
        assert torch.equal(nan, b.isnan())
        assert torch.equal(a[~nan].view(bits), b[~nan].view(bits))
        torch.testing.assert_close(na, nb, rtol=0, atol=0, equal_nan=True)  # (inf, nan): special
