"""A stand-in for the CUDA driver under the autotuner's device clock: `_FakeDriver` records the
calls `_DeviceClock` makes; each event pair reads 10 us apart."""

from __future__ import annotations

from typing import Any


class _FakeDriver:
    """The driver calls `_DeviceClock` makes, recorded; each event pair reads 10 us apart."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def cu(self) -> Any:
        log = self.log

        class D:
            def cuMemsetD32Async(self, *a: Any) -> tuple[int]:
                log.append("flush")
                return (0,)

            def cuEventRecord(self, event: str, stream: Any) -> tuple[int]:
                log.append(event)
                return (0,)

            def cuEventElapsedTime(self, *a: Any) -> tuple[int, float]:
                return (0, 0.010)

            def cuEventDestroy(self, event: str) -> tuple[int]:
                return (0,)

        return D()

    def call(self, what: str, fn: Any, *args: Any) -> Any:
        result = fn(*args)
        return result[1] if len(result) == 2 else None
