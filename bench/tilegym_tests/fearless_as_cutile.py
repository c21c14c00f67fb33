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
TileGym's suites (tests/suites/{liger,unsloth,flashinfer}, whose ops dispatch as "liger.<op>",
...) go the same way with adapters_suites.py: SUITE_COVERAGE maps each suite test file (or
file::class) to the suite ops it calls; a case whose parameter value fearless does not compute
raises adapters_suites.Uncovered, which the registered adapter turns into a skip of that case
with the reason.
Without cuda-tile installed, "cutile" is added to TileGym's available backends so its tests run.

Run (bench/tilegym_tests/run.sh does this, from a folder holding TileGym's tests/):

    PYTHONPATH=bench/tilegym_tests:src python3 -m pytest -p fearless_as_cutile tests/ops \\
        -k 'cutile and not cutile_rs and not test_perf' -q -rfE

(tests/suites/liger tests/suites/unsloth in place of tests/ops, or beside it, for the suites.)

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
from adapters_suites import SUITE_ADAPTERS, SUITE_UNCOVERED, Uncovered

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

# TileGym's suites: their packages (imported at install so their ops are in the registry)
SUITES = ("liger", "unsloth", "flashinfer")
_LIGER_FILES = (
    "cross_entropy",
    "dyt",
    "fused_add_rms_norm",
    "fused_linear_cross_entropy",
    "fused_linear_jsd",
    "fused_neighborhood_attention",
    "geglu",
    "group_norm",
    "grpo_loss",
    "jsd",
    "kl_div",
    "layer_norm",
    "llama4_rope",
    "multi_token_attention",
    "poly_norm",
    "qwen2vl_mrope",
    "relu_squared",
    "rms_norm",
    "rope",
    "softmax",
    "sparsemax",
    "swiglu",
    "tiled_mlp",
    "tvd",
)
# Suite test file (relative to TileGym's tests/), or "file::TestClass" where a file's classes
# test different ops -> the suite ops (dispatch names) its cutile tests call
SUITE_COVERAGE: dict[str, tuple[str, ...]] = {
    **{f"suites/liger/test_{n}.py": (f"liger.{n}",) for n in _LIGER_FILES},
    "suites/unsloth/test_swiglu.py::Test_Unsloth_SwiGLU_Forward": ("unsloth.swiglu_fg",),
    "suites/unsloth/test_swiglu.py::Test_Unsloth_SwiGLU_Backward": ("unsloth.swiglu_bwd",),
    "suites/unsloth/test_geglu.py::Test_Unsloth_GEGLU_Exact_Forward": (
        "unsloth.geglu_exact_forward",
    ),
    "suites/unsloth/test_geglu.py::Test_Unsloth_GEGLU_Exact_Backward": (
        "unsloth.geglu_exact_backward",
    ),
    "suites/unsloth/test_geglu.py::Test_Unsloth_GEGLU_Approx_Forward": (
        "unsloth.geglu_approx_forward",
    ),
    "suites/unsloth/test_geglu.py::Test_Unsloth_GEGLU_Approx_Backward": (
        "unsloth.geglu_approx_backward",
    ),
    "suites/unsloth/test_rms_layernorm.py": ("unsloth.rms_layernorm",),
    "suites/unsloth/test_layernorm.py": ("unsloth.layernorm",),
    "suites/unsloth/test_fp8.py::Test_Unsloth_WeightDequant": ("unsloth.weight_dequant",),
    "suites/unsloth/test_fp8.py::Test_Unsloth_ActQuant": ("unsloth.act_quant",),
    "suites/unsloth/test_fp8.py::Test_Unsloth_W8A8_FP8_Matmul": ("unsloth.w8a8_block_fp8_matmul",),
    "suites/unsloth/test_cross_entropy_loss.py": ("unsloth.cross_entropy_loss",),
    "suites/unsloth/test_grouped_gemm.py": ("unsloth.grouped_gemm",),
    "suites/unsloth/test_rope_embedding.py::Test_Unsloth_RoPE_Embedding": (
        "unsloth.rope_embedding",
    ),
    "suites/unsloth/test_rope_embedding.py::Test_Unsloth_RoPE_Embedding_QK": (
        "unsloth.rope_embedding_qk",
    ),
    "suites/flashinfer/test_flashinfer_attention.py::Test_FlashInfer_PrefillPaged": (
        "flashinfer.attention.prefill_attention_kv_paged",
    ),
    "suites/flashinfer/test_flashinfer_attention.py::Test_FlashInfer_PrefillRagged": (
        "flashinfer.attention.prefill_attention_kv_ragged",
    ),
    "suites/flashinfer/test_flashinfer_attention.py::Test_FlashInfer_DecodePaged": (
        "flashinfer.attention.decode_attention_kv_paged",
    ),
    "suites/flashinfer/test_flashinfer_attention.py::Test_FlashInfer_MLADecodePaged": (
        "flashinfer.attention.decode_mla_kv_paged",
    ),
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


def suite_impl(
    name: str, fn: Callable[..., Any], original: Callable[..., Any] | None
) -> Callable[..., Any]:
    """The "cutile" entry for suite op `name`: its fearless adapter `fn`; where `fn` raises
    Uncovered (a parameter value fearless does not compute) the test case is skipped with the
    reason, or with FEARLESS_TG_KEEP_TILEGYM=1 TileGym's own cuTile `original` runs it."""

    def impl(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Uncovered as e:
            if original is not None and os.environ.get("FEARLESS_TG_KEEP_TILEGYM") == "1":
                return original(*args, **kwargs)
            pytest.skip(f"{name}: {e}")

    impl.__name__ = fn.__name__
    impl.__wrapped__ = fn  # type: ignore[attr-defined]
    return impl


def install_suites(done: dict[str, list[str]]) -> None:
    """Imports TileGym's suite packages (their ops and cuTile implementations register) and
    writes each adapter of adapters_suites.py over its op's "cutile" entry."""
    from tilegym.backend import dispatcher

    for suite in SUITES:
        try:
            importlib.import_module(f"tilegym.suites.{suite}")
        except Exception:
            done["missing"].append(f"tilegym.suites.{suite}")
    for name, (_, fn) in sorted(SUITE_ADAPTERS.items()):
        if name in dispatcher._REGISTRY:
            original = dispatcher._REGISTRY[name].get("cutile")
            dispatcher.register_impl(name, backend="cutile")(suite_impl(name, fn, original))
            done["registered"].append(name)


def install() -> dict[str, list[str]]:
    """Registers the adapters (tests/ops' and the suites') in TileGym's dispatcher and applies
    PATCHES; returns what it did: {"registered": registry names, "patched": module attributes,
    "missing": patches or suites whose module does not import}."""
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
    install_suites(done)
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


def suite_file(path: str) -> str | None:
    """`path` relative to TileGym's tests folder ("suites/liger/test_x.py"), None outside its
    tests/suites."""
    p = path.replace(os.sep, "/")
    i = p.rfind("tests/suites/")
    return p[i + len("tests/") :] if i >= 0 else None


def suite_skip_reason(rel: str, cls: str | None) -> str | None:
    """Why the cutile tests of class `cls` (None: a module-level function) of suite test file
    `rel` are skipped, None if fearless runs them (a case may still skip: suite_impl)."""
    ops = SUITE_COVERAGE.get(f"{rel}::{cls}") if cls else None
    ops = ops or SUITE_COVERAGE.get(rel)
    if ops is None:
        return f"fearless has no operator mapped for TileGym's {rel}"
    lacking = [o for o in ops if o not in SUITE_ADAPTERS]
    if not lacking:
        return None
    return "; ".join(f"{o}: {SUITE_UNCOVERED.get(o, 'fearless has no adapter')}" for o in lacking)


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
        cls = getattr(item, "cls", None)
        if rel is None:
            srel = suite_file(str(item.path))
            sreason = suite_skip_reason(srel, cls.__name__ if cls else None) if srel else None
            if sreason:
                item.add_marker(pytest.mark.skip(reason=sreason))
            continue
        if rel in LIFTED_SKIPS:
            lift_skips(item, LIFTED_SKIPS[rel])
        reason = skip_reason(rel, cls.__name__) if cls is not None else None
        reason = reason or skip_reason(rel, getattr(item, "originalname", item.name))
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
