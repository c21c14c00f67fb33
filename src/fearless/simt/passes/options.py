"""Options and outputs shared by the passes of one compilation."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...abi import SiteInfo
from ...errors import Location


@dataclass
class PassOptions:
    # Device-check sites, appended by bounds_insert; indexes baked into the code.
    sites: list[SiteInfo] = field(default_factory=list)
    # Number of checks bounds_elim proved and removed (reported by `inspect`).
    checks_removed: int = 0
    # False for `unsafe=True` kernels: no device bounds checks at all.
    insert_checks: bool = True
    # `requires=` relations between two lengths: (param, op, param), e.g. ("c", "==", "a").
    len_relations: list[tuple[str, str, str]] = field(default_factory=list)
    # The spans of the kernel's `with simt.unsafe():` statements (their sites say so).
    unsafe_regions: tuple[Location, ...] = ()

    def in_unsafe(self, loc: Location) -> bool:
        """Whether `loc` stands inside one of the `unsafe_regions`."""
        return any(
            r.file == loc.file and r.line <= loc.line <= (r.end_line or r.line)
            for r in self.unsafe_regions
        )
