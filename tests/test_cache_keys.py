"""A kernel's disk-cache key follows its source: editing the kernel, or a device function or
Tile helper it calls, is a different key on both tracks (issue 16: no test checked this), and
the same source in another file is the same key."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import fearless as fl
from fearless import config
from fearless.runtime.target import current_target
from fearless.simt import compiler as simt_compiler
from fearless.tile import compiler as tile_compiler

SIMT = """
import fearless as fl
from fearless import simt


@simt.device
def scale(v: fl.f32) -> fl.f32:
    return v * {factor}


@simt.kernel
def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = scale(x[i]) + {offset}
"""

TILE = """
import fearless as fl
from fearless import tile


@tile.function
def scale(v):
    return v * {factor}


@tile.kernel
def k(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(scale(tile.load_like(x, out)) + {offset})
"""


def _module(tmp_path: Path, name: str, text: str) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _simt_key(mod: ModuleType) -> str:
    return simt_compiler.cache_key(mod.k.spec, "sm_90")


def _tile_key(mod: ModuleType) -> str:
    x = fl.zeros(256)
    part = fl.zeros(256).partition((128,))
    signature, _ = mod.k.signature_of((part, x), current_target())
    return tile_compiler.cache_key(mod.k.ir_for(signature), "sm_90")


@pytest.mark.parametrize(
    ("text", "key"), [(SIMT, _simt_key), (TILE, _tile_key)], ids=["simt", "tile"]
)
def test_editing_a_kernel_or_what_it_calls_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: object
) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    track = "simt" if text is SIMT else "tile"
    keys = {
        edit: key(_module(tmp_path, f"cache_key_{track}_{i}", text.format(**values)))  # type: ignore[operator]
        for i, (edit, values) in enumerate(
            {
                "base": {"factor": "2.0", "offset": "1.0"},
                "kernel edited": {"factor": "2.0", "offset": "3.0"},
                "helper edited": {"factor": "5.0", "offset": "1.0"},
                "same source": {"factor": "2.0", "offset": "1.0"},
            }.items()
        )
    }
    assert keys["kernel edited"] != keys["base"]
    assert keys["helper edited"] != keys["base"]
    assert keys["same source"] == keys["base"]  # another file, same text: the same binary


@pytest.mark.parametrize(
    ("text", "key", "compiler"),
    [(SIMT, _simt_key, simt_compiler), (TILE, _tile_key, tile_compiler)],
    ids=["simt", "tile"],
)
def test_a_changed_compiler_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: object, compiler: ModuleType
) -> None:
    """A lowering changed within one fearless version never reuses an old binary: both tracks
    hash their compiler's source into the key (Tile did not before issue 34)."""
    mod = _module(
        tmp_path,
        f"digest_{compiler.__name__.rsplit('.', 2)[1]}",
        text.format(factor=2.0, offset=1.0),
    )
    assert callable(key)
    before = key(mod)
    monkeypatch.setattr(compiler, "compiler_digest", lambda: "another compiler")
    assert key(mod) != before


@pytest.mark.parametrize(
    ("text", "key", "compiler"),
    [(SIMT, _simt_key, simt_compiler), (TILE, _tile_key, tile_compiler)],
    ids=["simt", "tile"],
)
def test_an_upgrade_that_left_the_compiler_alone_keeps_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: object, compiler: ModuleType
) -> None:
    """Issue 37: compiled kernels survive a fearless upgrade whose compiler source did not
    change: the key holds the compiler's digest, not the version number."""
    import fearless.version

    mod = _module(
        tmp_path,
        f"upgrade_{compiler.__name__.rsplit('.', 2)[1]}",
        text.format(factor=2.0, offset=1.0),
    )
    assert callable(key)
    before = key(mod)
    monkeypatch.setattr(fearless.version, "__version__", "99.0.0")
    monkeypatch.setattr(fl, "__version__", "99.0.0")
    assert key(mod) == before
    assert "__version__" not in vars(compiler)  # nothing left that could read the old one


def test_a_tuned_winner_survives_an_upgrade_that_left_the_compilers_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The winner's file is named by the compilers' source, not the version: another version
    with the same compilers finds it; a changed compiler tunes again."""
    from fearless import autotune_store, cache

    def fn() -> None:
        """A tuned function."""

    configs = [{"tile": 64}, {"tile": 128}]
    before = autotune_store.entry_path(fn, "fn", (1024,), "sim", configs)
    monkeypatch.setattr(fl, "__version__", "99.0.0")
    assert autotune_store.entry_path(fn, "fn", (1024,), "sim", configs) == before
    monkeypatch.setattr(cache, "source_digest", lambda *parts: "another compiler")
    assert autotune_store.entry_path(fn, "fn", (1024,), "sim", configs) != before
