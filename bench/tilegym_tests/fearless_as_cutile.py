"""pytest plugin: fearless.ops stands in for TileGym's cuTile backend under TileGym's own tests.

Loaded with `-p fearless_as_cutile` (bench/tilegym_tests on PYTHONPATH), before TileGym's tests
are collected it writes each adapter of adapters.py into TileGym's dispatcher registry as the
"cutile" implementation of its op (`tilegym.backend.register_impl(name, "cutile")`, which
replaces cuTile's entry in `dispatcher._REGISTRY[name]`), swaps the module attributes that
TileGym's tests call directly (adapters.PATCHES; the swapped function runs fearless only while
the current backend is "cutile"), and marks every collected test of an op fearless lacks skipped
("fearless has no <op>"), so that a pass or a failure in a cutile test is fearless's alone. A
module-level skip that only cuTile's own compiler needs (LIFTED_SKIPS) is lifted where fearless
serves the op.
Without cuda-tile installed, "cutile" is added to TileGym's available backends so its tests run.

Run (bench/tilegym_tests/run.sh does this, from a folder holding TileGym's tests/):

    PYTHONPATH=bench/tilegym_tests:src python3 -m pytest -p fearless_as_cutile tests/ops \\
        -k 'cutile and not cutile_rs and not test_perf' -q -rfE

FEARLESS_TG_KEEP_TILEGYM=1 leaves the ops fearless lacks to TileGym's cuTile instead of skipping.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from adapters import ADAPTERS, PATCHES

# TileGym test file (relative to tests/ops) -> the TileGym ops its cutile tests call
COVERAGE: dict[str, tuple[str, ...]] = {
    "activation/test_geglu.py": ("geglu",),
    "activation/test_gelu.py": ("gelu",),
    "activation/test_relu.py": ("relu",),
    "experimental/test_attention_backward.py": ("fmha_backward", "fmha_forward_with_lse"),
    "experimental/test_fused_linear_cross_entropy.py": ("fused_linear_cross_entropy",),
    "experimental/test_fused_swiglu_backward.py": ("silu_and_mul", "matmul"),
    "experimental/test_nvfp4_quantize.py": ("nvfp4_quantize",),
    "experimental/test_mhc.py": ("mhc_gemm_rms_scale", "mhc_sinkhorn", "mhc_apply_residual"),
    "experimental/test_rmsnorm_backward.py": ("rms_norm", "get_rms_norm_module"),
    "experimental/test_sparse_mla.py": ("sparse_mla",),
    "experimental/test_swa_attention.py": ("swa_attention",),
    "test_attention.py": ("fmha",),
    "test_attention_sink.py": ("attention_sink",),
    "test_attention_variant.py": ("fmha_variant",),
    "test_bmm.py": ("bmm",),
    "test_chunk_gated_delta_rule.py": ("chunk_gated_delta_rule",),
    "test_dropout.py": ("dropout",),
    "test_flash_decode.py": ("fmha_decode",),
    "test_gemma_attention.py": ("gemma_attention",),
    "test_gemma_attention_decode.py": ("gemma_attention_decode",),
    "test_group_gemm.py": ("group_gemm",),
    "test_layer_norm_legacy.py": ("layer_norm_legacy", "persistent_layer_norm"),
    "test_matmul.py": ("matmul",),
    "test_mla.py": ("mla",),
    "test_mla_decoding.py": ("mla_decoding",),
    "test_mla_decoding_split_kv.py": ("mla_decoding_split_kv",),
    "test_moe.py": ("fused_moe",),
    "test_recurrent_gated_delta_rule.py": ("recurrent_gated_delta_rule",),
    "test_rms_norm.py": ("rms_norm",),
    "test_rope.py": ("apply_rope_base",),
    "test_silu_and_mul.py": ("silu_and_mul",),
    "test_softmax.py": ("softmax",),
    "test_splitk_reduce.py": ("splitk_reduce",),
    "test_swiglu.py": ("get_swiglu",),
}

# Files, or (file, test class or function) pairs, whose cutile tests exercise what fearless lacks
SKIP_FILES: dict[str, str] = {}
SKIP_TESTS: dict[tuple[str, str], str] = {
    ("experimental/test_sparse_mla.py", "test_op_invalid_kernel_configs"): (
        "tests cuTile's own validation of kernel_configs: fearless takes that tuning keyword and "
        "ignores it"
    ),
}

# Files whose module-level skip is a requirement of cuTile's own compiler, not of the op: fearless
# serves the op through its own bytecode, so the plugin lifts the skip whose reason starts so.
# nvfp4_quantize: fearless packs the fp4 codes by hand and needs no V_13_3 bytecode.
LIFTED_SKIPS: dict[str, str] = {
    "experimental/test_nvfp4_quantize.py": "Requires TileIR bytecode V_13_3+",
}


def _only_when_cutile(
    fearless_fn: Callable[..., Any], original: Callable[..., Any]
) -> Callable[..., Any]:
    """fearless_fn while TileGym's current backend is "cutile", original otherwise."""
    from tilegym.backend import get_current_backend

    def swapped(*args: Any, **kwargs: Any) -> Any:
        if get_current_backend() == "cutile":
            return fearless_fn(*args, **kwargs)
        return original(*args, **kwargs)

    swapped.__name__ = getattr(fearless_fn, "__name__", "fearless")
    swapped.__wrapped__ = original  # type: ignore[attr-defined]
    return swapped


def install() -> dict[str, list[str]]:
    """Registers the adapters in TileGym's dispatcher and applies PATCHES; returns what it did:
    {"registered": registry names, "patched": module attributes, "missing": patches whose module
    does not import}."""
    from tilegym.backend import dispatcher, selector

    if "cutile" not in selector._AVAILABLE_BACKENDS:  # no cuda-tile: fearless is the only cutile
        selector._AVAILABLE_BACKENDS.add("cutile")
    done: dict[str, list[str]] = {"registered": [], "patched": [], "missing": []}
    for name, (_, fn) in sorted(ADAPTERS.items()):
        if name in dispatcher._REGISTRY:
            dispatcher.register_impl(name, backend="cutile")(fn)
            done["registered"].append(name)
    for target, name in sorted(PATCHES.items()):
        mod_name, attr = target.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except Exception:
            done["missing"].append(target)
            continue
        original = getattr(mod, attr, None)
        fearless_fn = ADAPTERS[name][1]
        if mod_name.startswith("tilegym.ops.cutile.") or original is None:
            setattr(mod, attr, fearless_fn)
        else:
            setattr(mod, attr, _only_when_cutile(fearless_fn, original))
        done["patched"].append(target)
    return done


def shim_rotary_device() -> bool:
    """TileGym's test_rope.py builds `LlamaRotaryEmbedding(config=..., device=...)`, the
    transformers 4 signature; transformers 5 takes the config alone, so every RoPE test failed
    there before fearless ran (session 40, 18 failures). Where `device` is missing, the class
    in transformers' module becomes a subclass that takes it and moves its buffers there.
    Returns whether it shimmed."""
    try:
        from transformers.models.llama import modeling_llama
    except Exception:
        return False
    base = modeling_llama.LlamaRotaryEmbedding
    if "device" in inspect.signature(base.__init__).parameters:
        return False

    class LlamaRotaryEmbedding(base):  # type: ignore[misc, valid-type]
        def __init__(self, config: Any, device: Any = None, **kw: Any) -> None:
            super().__init__(config, **kw)
            if device is not None:
                self.to(device)

    modeling_llama.LlamaRotaryEmbedding = LlamaRotaryEmbedding
    return True


def is_cutile(nodeid: str) -> bool:
    """Whether a test id runs the "cutile" backend (not "cutile_rs" / "cutile-rs")."""
    return re.search(r"cutile(?![_-]rs)", nodeid) is not None


def ops_file(path: str) -> str | None:
    """`path` relative to TileGym's tests/ops folder, None outside it."""
    p = path.replace(os.sep, "/")
    i = p.rfind("tests/ops/")
    return p[i + len("tests/ops/") :] if i >= 0 else None


def skip_reason(rel: str, func: str) -> str | None:
    """Why the cutile test (class or function) `func` of TileGym test file `rel` is skipped, None if fearless runs it."""
    if (rel, func) in SKIP_TESTS:
        return SKIP_TESTS[(rel, func)]
    if rel in SKIP_FILES:
        return SKIP_FILES[rel]
    ops = COVERAGE.get(rel)
    if ops is None:
        return f"fearless has no operator mapped for TileGym's {rel}"
    lacking = [o for o in ops if o not in ADAPTERS]
    return f"fearless has no {', '.join(lacking)}" if lacking else None


def pytest_configure(config: pytest.Config) -> None:
    """Installs the adapters before TileGym's test modules import (and bind) its functions."""
    done = install()
    if shim_rotary_device():
        done["patched"].append("transformers LlamaRotaryEmbedding(device=)")
    config._fearless_tg = done  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What the plugin registered and patched, at the top of the run."""
    done = getattr(config, "_fearless_tg", {})
    return [
        f"fearless_as_cutile: {len(done.get('registered', []))} cutile ops registered: "
        + " ".join(done.get("registered", [])),
        f"fearless_as_cutile: patched {done.get('patched', [])}, missing {done.get('missing', [])}",
    ]


def lift_skips(node: pytest.Item | pytest.Collector, prefix: str) -> int:
    """Drops from `node` and its parents the skipif marks whose reason starts with `prefix`;
    returns how many it dropped."""
    dropped = 0
    for n in node.listchain():
        keep = [
            m
            for m in n.own_markers
            if not (m.name == "skipif" and str(m.kwargs.get("reason", "")).startswith(prefix))
        ]
        dropped += len(n.own_markers) - len(keep)
        n.own_markers[:] = keep
    return dropped


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks skipped the cutile tests of what fearless lacks (unless FEARLESS_TG_KEEP_TILEGYM=1),
    and lifts the cuTile-compiler skips of LIFTED_SKIPS from the tests fearless serves."""
    if os.environ.get("FEARLESS_TG_KEEP_TILEGYM") == "1":
        return
    for item in items:
        if not is_cutile(item.nodeid):
            continue
        rel = ops_file(str(item.path))
        if rel is None:
            continue
        if rel in LIFTED_SKIPS:
            lift_skips(item, LIFTED_SKIPS[rel])
        cls = getattr(item, "cls", None)
        reason = skip_reason(rel, cls.__name__) if cls is not None else None
        reason = reason or skip_reason(rel, getattr(item, "originalname", item.name))
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
