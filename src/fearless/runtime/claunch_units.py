"""The compiled launcher's C sources and their tag: which files make the module, in which order,
and the digest that names a build of them.

Both builds read this module: `pip install` (setup.py, which loads it by path, since fearless's
dependencies may not be installed while it builds) compiles the module into the package, and
runtime/claunch.py builds it at first use into the cache directory when the installed one is
missing or was built from other sources. It imports nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).parent
# one module: each unit's header declares what its .c defines, and no unit includes or calls one
# above it (claunch_common.h draws them; tools/check_imports.py holds it)
UNITS = ("claunch_common", "claunch_streams", "claunch_simt", "claunch_prepared", "claunch_tile")
SOURCES = (*(HERE / f"{u}.c" for u in UNITS), HERE / "claunch.c")
HEADERS = tuple(HERE / f"{u}.h" for u in UNITS)
# The module's import name; the package's built copy is fearless.runtime.<this>.
MODULE = "_fearless_claunch"


def tag() -> str:
    """The digest of the sources, this Python and this platform: a build with another tag was
    made from other sources (an editable install whose C changed since) and is not used."""
    source = b"".join(f.read_bytes() for f in (*SOURCES, *HEADERS))
    return hashlib.sha256(
        source + sys.version.encode() + sysconfig.get_platform().encode()
    ).hexdigest()[:16]
