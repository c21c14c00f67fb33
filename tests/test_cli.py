"""The `fearless` command: doctor's checks on this machine, `run`, `inspect` errors, help.

`demo` and a successful `inspect` of a compiled kernel are tested in test_cli_demo.py.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fearless.backends import toolchain
from fearless.cli import doctor
from fearless.cli.main import build_parser, main

SRC = Path(__file__).resolve().parents[1] / "src"


def python_m_fearless(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m fearless ARGS` in a fresh interpreter that imports this checkout."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "fearless", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path, **env},
        timeout=300,
        check=False,
    )


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


# --- doctor -------------------------------------------------------------------------------


def test_llvmlite_has_the_nvptx_target() -> None:
    check = doctor.check_llvmlite()
    assert check.status == "ok", check.render()
    assert "NVPTX" in check.detail


def test_libdevice_is_found_in_the_nvvm_wheel() -> None:
    path = toolchain.find_libdevice()
    root = toolchain.cuda_root_of_wheels()
    assert path is not None and root is not None
    assert path == root / "nvvm" / "libdevice" / "libdevice.10.bc"
    assert doctor.check_libdevice().status == "ok"


def test_ptxas_is_found_in_the_nvcc_wheel_and_reports_its_version() -> None:
    path = toolchain.find_ptxas()
    root = toolchain.cuda_root_of_wheels()
    assert path is not None and root is not None
    assert path == root / "bin" / "ptxas"
    version = toolchain.tool_version(path)
    assert version is not None and re.fullmatch(r"\d+\.\d+\.\d+", version)
    check = doctor.check_ptxas()
    assert check.status == "ok" and version in check.detail


def test_no_driver_is_a_warning_that_names_the_simulator() -> None:
    check = doctor.check_driver(doctor.GpuProbe(error="no NVIDIA driver"))
    assert check.status == "warn"
    assert "no GPU: kernels run on the simulator" in check.detail


def test_the_transformers_check_says_what_transformers_4_lacks() -> None:
    """Optional: absent is fine; 4.x warns that `moe=` needs 5 (fearless.transformers refuses
    the flag there), with the fix; 5 is ok."""
    old = doctor.check_transformers("4.57.1")
    assert old.status == "warn" and "`moe=`" in old.detail and "transformers>=5" in (old.fix or "")
    assert doctor.check_transformers("5.25.0").status == "ok"
    assert doctor.check_transformers().status in ("ok", "warn")  # this machine's, whatever it is


def test_this_machines_driver_check_does_not_fail() -> None:
    probe = doctor.probe_gpu()  # never raises, GPU or not
    assert doctor.check_driver(probe).status in ("ok", "warn")
    if probe.driver is None:
        assert not probe.usable
        assert doctor.check_driver(probe).status == "warn"
        assert doctor.check_gpu(probe).status == "warn"


def test_gpu_check_names_the_device_and_its_arch() -> None:
    probe = doctor.GpuProbe(driver="13.0", name="NVIDIA H200", compute_capability=(9, 0))
    check = doctor.check_gpu(probe)
    assert check.status == "ok"
    assert check.detail == "NVIDIA H200, compute capability sm_90"


def test_gpu_check_says_which_of_several_gpus_fearless_runs_on() -> None:
    probe = doctor.GpuProbe(driver="13.0", name="NVIDIA H200", compute_capability=(9, 0), count=2)
    check = doctor.check_gpu(probe)
    assert check.status == "ok"
    assert check.detail == (
        "NVIDIA H200, compute capability sm_90 (GPU 0 of 2; a process runs on the GPU it is "
        "given first, or on torch's current device: fl.set_device(i) or torch.cuda.set_device(i))"
    )


def test_target_names_the_simulators_pretend_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_TARGET", "sim")
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "2")
    assert doctor.check_target().detail == (
        "sim (from FEARLESS_TARGET), 2 pretend devices (FEARLESS_SIM_DEVICES)"
    )
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "two")
    check = doctor.check_target()
    assert check.status == "warn" and "must be a positive whole number" in check.detail


def test_target_follows_the_gpu_and_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = doctor.GpuProbe(driver="13.0", name="NVIDIA H200", compute_capability=(9, 0))
    none = doctor.GpuProbe(error="no NVIDIA driver")
    monkeypatch.delenv("FEARLESS_TARGET", raising=False)
    assert doctor.check_target(gpu).detail.startswith("cuda")
    assert doctor.check_target(none).detail.startswith("sim")
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    assert doctor.check_target(none).status == "warn"
    monkeypatch.setenv("FEARLESS_TARGET", "tpu")
    assert doctor.check_target(gpu).status == "fail"


def test_missing_tileiras_is_a_warning_with_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolchain, "find_tileiras", lambda: None)
    check = doctor.check_tileiras()
    assert check.status == "warn"
    assert check.fix == "Tile track needs `pip install nvidia-cuda-tileiras`"


def test_tileiras_with_an_old_cuda_home_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "tileiras"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    fake.chmod(0o755)
    (tmp_path / "version.json").write_text('{"cuda": {"version": "13.0.2"}}')
    monkeypatch.setattr(toolchain, "find_tileiras", lambda: fake)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    check = doctor.check_tileiras()
    assert check.status == "warn" and "13.0" in check.detail
    assert check.fix is not None and "CUDA_HOME" in check.fix


def test_cache_dir_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    assert doctor.check_cache_dir().status == "ok"
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "file" / "cache"))
    assert doctor.check_cache_dir().status == "fail"


def test_doctor_exits_0_on_this_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FEARLESS_TARGET", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "✗" not in out
    for name in ("Python", "NumPy", "llvmlite", "libdevice", "ptxas", "cuda-core", "driver"):
        assert re.search(rf"^[✓⚠] {name} ", out, re.MULTILINE), name


def test_doctor_exits_1_when_something_required_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "find_libdevice", lambda: None)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^✗ libdevice ", out, re.MULTILINE)
    assert "fix: pip install nvidia-nvvm" in out


# --- run ----------------------------------------------------------------------------------


def test_run_prints_a_fearless_error_as_its_diagnostic_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(
        tmp_path,
        "bad.py",
        """\
        from fearless.errors import CompileError, Location
        x = 1
        raise CompileError("cannot frobnicate `x`", Location(__file__, 2, 0, 2, 1),
                           label="here", help="leave `x` alone")
        """,
    )
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("error[E0001]: cannot frobnicate `x`")
    assert f"--> {script}:2:1" in err
    assert "2 | x = 1" in err
    assert "= help: leave `x` alone" in err


def test_run_keeps_frames_with_fearless_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = write(tmp_path, "bad.py", "from fearless.errors import BorrowError\n")
    script.write_text(script.read_text() + "raise BorrowError('aliased')\n")
    monkeypatch.setenv("FEARLESS_TRACEBACK", "1")
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "error[E0502]: aliased" in err


def test_run_keeps_the_traceback_of_other_exceptions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(
        tmp_path,
        "boom.py",
        """\
        def f():
            raise ValueError("boom")
        f()
        """,
    )
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert 'boom.py", line 3' in err and 'boom.py", line 2, in f' in err
    assert err.rstrip().endswith("ValueError: boom")
    assert "runpy" not in err and "cli/run.py" not in err  # only the script's frames


def test_run_shows_a_syntax_error_as_python_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path, "typo.py", "x = 1\nprint(x +)\n")
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cli/run.py" not in err and "runpy" not in err
    assert err.startswith(f'  File "{script.resolve()}", line 2\n    print(x +)\n')
    assert "^" in err and err.rstrip().endswith("SyntaxError: invalid syntax")


def test_run_shows_the_traceback_of_a_module_the_script_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "helper.py", "def f():\n    return {}['missing']\nf()\n")
    script = write(tmp_path, "main.py", "import helper\n")
    assert main(["run", str(script)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert f'File "{script.resolve()}", line 1, in <module>' in err
    assert 'helper.py", line 2, in f' in err and err.rstrip().endswith("KeyError: 'missing'")
    assert "runpy" not in err and "cli/run.py" not in err and "importlib" not in err


def test_run_passes_argv_and_runs_as_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(
        tmp_path,
        "args.py",
        """\
        import sys
        print(__name__, sys.argv[1:])
        sys.exit(int(sys.argv[-1]))
        """,
    )
    assert main(["run", str(script), "--flag", "3"]) == 3
    assert capsys.readouterr().out == "__main__ ['--flag', '3']\n"


def test_run_as_a_subprocess_exits_1_without_a_traceback(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "bad.py",
        "from fearless.errors import LaunchContractError\nraise LaunchContractError('too big')\n",
    )
    proc = python_m_fearless("run", str(script))
    assert proc.returncode == 1
    assert proc.stderr == "error[E0700]: too big\n"


def test_run_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err


# --- inspect ------------------------------------------------------------------------------

KERNELS = """\
from fearless.errors import KernelTypeError

class FakeKernel:  # stands in for a compiled kernel: only `inspect` matters here
    def __init__(self, fail=False):
        self.fail = fail
    def inspect(self, *args, stage="ir"):
        if self.fail:
            raise KernelTypeError("parameter `n` needs an annotation")
        return f"stage {stage} of k\\n"

k = FakeKernel()
broken = FakeKernel(fail=True)

def helper():
    pass

if __name__ == "__main__":
    raise SystemExit("the __main__ block must not run")
"""


def test_inspect_prints_the_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "kernels.py", KERNELS)
    assert main(["inspect", f"{path}::k", "--emit", "ptx"]) == 0
    assert capsys.readouterr().out == "stage ptx of k\n"


def test_inspect_renders_a_fearless_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "kernels2.py", KERNELS)
    assert main(["inspect", f"{path}::broken"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[E0308]: parameter `n` needs an annotation")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py::k", "no such file: missing.py"),
        ("{path}::", "expected FILE::KERNEL"),
        ("{path}::vecadd", "has no `vecadd`; its kernels: broken, k"),
        ("{path}::helper", "`helper` in {path} is a plain function, not a fearless kernel"),
    ],
)
def test_inspect_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    path = write(tmp_path, "kernels3.py", KERNELS)
    assert main(["inspect", target.format(path=path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fearless inspect: error: ") and err.count("\n") == 1
    assert message.format(path=path) in err


ONE_KERNEL = """\
import fearless as fl
from fearless import simt

@simt.kernel
def only(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0
"""


def test_inspect_of_a_file_takes_its_one_kernel_or_lists_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write(
        tmp_path,
        "one.py",
        ONE_KERNEL,
    )
    assert main(["inspect", str(one)]) == 0
    assert "only" in capsys.readouterr().out
    several = write(tmp_path, "several.py", KERNELS)
    assert main(["inspect", str(several)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"fearless inspect: error: {several} defines 2 kernels: broken (kernel), k (kernel)\n"
        f"  = help: name one: `fearless inspect {several}::broken`\n"
    )
    none = write(tmp_path, "none.py", "x = 1\n")
    assert main(["inspect", str(none)]) == 2
    assert f"{none} defines no kernel\n" in capsys.readouterr().err


def test_inspect_shows_the_files_own_errors_as_python_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = write(tmp_path, "typo.py", "x = 1\ndef f(:\n    pass\n")
    assert main(["inspect", f"{typo}::f"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "importlib" not in err
    assert err.startswith(f'  File "{typo}", line 2\n    def f(:\n')
    raises = write(tmp_path, "raises.py", "raise RuntimeError('no config file')\n")
    assert main(["inspect", f"{raises}::f"]) == 1
    err = capsys.readouterr().err
    assert err.count('  File "') == 1 and err.rstrip().endswith("RuntimeError: no config file")


def test_bench_says_so_when_its_results_folder_cannot_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("")
    out = tmp_path / "a_file" / "results"  # under a file: no folder can be made there
    assert main(["bench", "--dry-run", "--cases", "vecadd", "--out", str(out)]) == 2
    assert f"fearless bench: cannot write results to {out}" in capsys.readouterr().err


SIMT_AND_TILE = """\
import fearless as fl
from fearless import simt, tile


@simt.device
def twice(x: fl.f32) -> fl.f32:
    return x + x


@simt.kernel
def double(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = twice(a[i])


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel
def overindexed(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, z)
    z.store(v[0, 1, 2])
"""


@pytest.mark.parametrize(
    ("kernel", "stage", "says"),
    [
        ("double", "tileir", "`double` is a SIMT kernel, which has no `tileir` stage"),
        ("add", "ptx", "`add` is a Tile kernel, which has no `ptx` stage"),
    ],
)
def test_inspect_a_stage_of_the_other_track_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kernel: str, stage: str, says: str
) -> None:
    path = write(tmp_path, "tracks.py", SIMT_AND_TILE)
    assert main(["inspect", f"{path}::{kernel}", "--emit", stage]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fearless inspect: error: {says}")
    stages = (
        "ir, llvm, ptx, sass, resources" if stage == "tileir" else "ir, tileir, sass, resources"
    )
    assert f"stages are {stages}" in err


def test_inspect_says_what_a_device_function_and_a_module_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "tracks2.py", SIMT_AND_TILE)
    assert main(["inspect", f"{path}::twice"]) == 2
    err = capsys.readouterr().err
    assert "`twice` in" in err and "is a `@simt.device` function" in err
    assert "runs only when a kernel calls it" in err and "inspect a kernel that calls" in err
    assert "DeviceFunction" not in err
    assert main(["inspect", f"{path}::fl"]) == 2
    err = capsys.readouterr().err
    assert "is a module, not a fearless kernel; its kernels: add, double, overindexed" in err


def test_too_many_indices_of_a_tile_is_a_documented_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "tracks3.py", SIMT_AND_TILE)
    assert main(["inspect", f"{path}::overindexed"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[E0308]: too many indices for a 1-d tile: 3")
    assert "undocumented" not in err and "E0999" not in err


def test_every_code_fearless_raises_is_documented() -> None:
    """Every `code="E...."` in the source is one `fearless explain` knows (an undocumented one
    renders as E0999, an internal error, whatever the mistake)."""
    from fearless.errors import CODES

    used = set()
    for file in (SRC / "fearless").rglob("*.py"):
        used |= set(re.findall(r"\bcode=\"(E\d{4})\"", file.read_text(encoding="utf-8")))
    assert used and used <= set(CODES), sorted(used - set(CODES))


def test_inspect_a_file_that_exits_at_import_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse at import parses `[FILE]`, not fearless's own arguments, and its exit is
    a usage error naming the file."""
    path = write(
        tmp_path,
        "script.py",
        """\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("size")
        parser.parse_args()
        """,
    )
    argv = sys.argv[:]
    assert main(["inspect", f"{path}::k"]) == 2
    assert sys.argv == argv
    err = capsys.readouterr().err
    assert "usage: script.py" in err and "::k" not in err.splitlines()[0]
    assert f"fearless inspect: error: {path} exits when imported (sys.exit(2))" in err
    assert 'put the script part of the file under `if __name__ == "__main__":`' in err


@pytest.mark.parametrize("command", [["run", "."], ["inspect", ".::k"]])
def test_a_folder_is_not_a_python_file(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command) == 2
    assert "`.` is a folder, not a Python file" in capsys.readouterr().err


def test_inspect_rejects_an_unknown_stage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "k.py::k", "--emit", "asm"]) == 2
    assert "invalid choice: 'asm'" in capsys.readouterr().err


# --- the command itself -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["explain", "doctor"])
def test_a_closed_pipe_ends_the_command_silently(command: str) -> None:
    """`fearless doctor | head -1`: no traceback, the status a shell gives SIGPIPE (141)."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fearless", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert err == ""


def test_ctrl_c_is_one_line_and_status_130(tmp_path: Path) -> None:
    """A KeyboardInterrupt (here raised by the file `inspect` imports) shows no fearless
    frames: one line, status 130."""
    path = write(tmp_path, "interrupted.py", "raise KeyboardInterrupt\n")
    proc = python_m_fearless("inspect", f"{path}::k")
    assert proc.returncode == 130
    assert proc.stderr == "fearless: interrupted\n"


def test_run_shows_a_ctrl_c_in_the_script_as_python_does(tmp_path: Path) -> None:
    path = write(tmp_path, "interrupted.py", "def f():\n    raise KeyboardInterrupt\nf()\n")
    proc = python_m_fearless("run", str(path))
    assert proc.returncode == 130
    assert proc.stderr.startswith("Traceback (most recent call last):")
    assert 'interrupted.py", line 2, in f' in proc.stderr
    assert proc.stderr.rstrip().endswith("KeyboardInterrupt")
    assert "runpy" not in proc.stderr and "cli/run.py" not in proc.stderr


def test_doctor_counts_in_the_singular() -> None:
    checks = [doctor.Check("a", "ok", ""), doctor.Check("b", "warn", "")]
    assert doctor.summary([*checks, doctor.Check("c", "fail", "")]).startswith(
        "1 ok, 1 warning, 1 problem:"
    )
    assert doctor.summary(checks * 2).startswith("2 ok, 2 warnings, 0 problems:")


def test_doctor_checks_fearless_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEARLESS_ARCH", raising=False)
    assert doctor.check_arch() is None
    monkeypatch.setenv("FEARLESS_ARCH", "sm_90a")
    check = doctor.check_arch()
    assert check is not None and check.status == "ok" and "sm_90a" in check.detail
    monkeypatch.setenv("FEARLESS_ARCH", "sm_12")
    check = doctor.check_arch()
    assert check is not None and check.status == "fail"
    assert "FEARLESS_ARCH='sm_12'" in check.detail and "sm_80, sm_90, sm_90a" in (check.fix or "")
    assert "check_arch" in inspect.getsource(doctor.run_checks)


def test_bench_out_that_is_a_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("")
    out = tmp_path / "a_file"
    assert main(["bench", "--dry-run", "--cases", "vecadd", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out} is a file; --out takes a folder" in err and "File exists" not in err


def test_bench_unknown_case_names_the_closest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    assert main(["bench", "--dry-run", "--cases", "vecad", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no case matches 'vecad'" in err and "the closest: vecadd" in err
    assert "`fearless bench --list`" in err and len(err) < 400  # not every case on one line
    assert not out.exists()


def test_check_of_a_folder_without_python_files_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"no Python files (`*.py`) found in `{tmp_path}`" in out


def test_explain_help_names_its_argument_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "-h"]) == 0
    assert "usage: fearless explain [-h] [CODE]" in capsys.readouterr().out


def test_commands_are_exactly_the_implemented_ones() -> None:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if a.dest == "command")
    assert set(sub.choices or ()) == {
        "demo",
        "doctor",
        "run",
        "inspect",
        "check",
        "explain",
        "bench",
        "compile",
        "new",
        "tune",
    }


def test_bench_without_the_suite_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The suite is the package fearless_bench beside fearless; `fearless bench` imports it when
    it runs, and where it is missing says how to install it (the rest of the CLI never needs it)."""
    monkeypatch.setitem(sys.modules, "fearless_bench", None)  # import fearless_bench: not found
    assert main(["bench", "--list"]) == 2
    err = capsys.readouterr().err
    assert "needs the benchmark suite, the package `fearless_bench`" in err
    assert "pip install 'fearless[bench]'" in err


@pytest.mark.parametrize("argv", [["--help"], ["demo", "-h"], ["doctor", "-h"], ["run", "-h"]])
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("usage: fearless")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "required: COMMAND" in capsys.readouterr().err


def test_python_m_fearless() -> None:
    proc = python_m_fearless("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: fearless") and "doctor" in proc.stdout


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import fearless

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"fearless {fearless.__version__}\n"


def test_the_gpu_probe_names_device_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuda.core's `Device()` with no number asks the driver for the current context's
    device: with none yet, compute-sanitizer reports that call (`fearless demo` had one
    error of its own, issue 33). The probe names device 0."""
    asked: list[tuple[object, ...]] = []

    class Device:
        def __init__(self, *args: object) -> None:
            asked.append(args)
            self.name, self.compute_capability = "NVIDIA H200", (9, 0)

    class Driver:
        @staticmethod
        def cuDeviceGetCount() -> tuple[int, int]:
            return 0, 1

    fakes = {"cuda.core": type("Core", (), {"Device": Device}), "cuda.bindings.driver": Driver}
    monkeypatch.setattr(doctor, "_driver_version", lambda: ("13.0", None))
    monkeypatch.setattr(doctor.importlib, "import_module", lambda name: fakes[name])
    probe = doctor.probe_gpu()
    assert asked == [(0,)] and probe.name == "NVIDIA H200" and probe.error is None
