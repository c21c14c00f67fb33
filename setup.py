"""The one part of the build pyproject.toml cannot declare: the compiled launcher, built when
fearless is installed (runtime/claunch.py builds it at first use where this build failed or
its sources changed since). Optional: without a C compiler the install still succeeds."""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup

_UNITS_FILE = Path(__file__).parent / "src" / "fearless" / "runtime" / "claunch_units.py"
_spec = importlib.util.spec_from_file_location("claunch_units", _UNITS_FILE)
assert _spec is not None and _spec.loader is not None
units = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(units)

root = Path(__file__).parent
setup(
    ext_modules=[
        Extension(
            f"fearless.runtime.{units.MODULE}",
            sources=[str(f.relative_to(root)) for f in units.SOURCES],
            depends=[str(f.relative_to(root)) for f in units.HEADERS],
            define_macros=[("FEARLESS_CLAUNCH_TAG", f'"{units.tag()}"')],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
