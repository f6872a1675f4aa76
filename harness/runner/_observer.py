from __future__ import annotations

from typing import Protocol

__all__ = ["RunObserver", "NullObserver"]


class RunObserver(Protocol):
    """What a live display hears from the runner. Every method is optional to act on."""

    def on_run_start(self, result, *, total: int) -> None: ...

    def on_measurement_start(self, *, kernel: str, input_label: str, repeat: int) -> None: ...

    def on_phase(self, phase: str) -> None: ...

    def on_chunk(self, chunk, check, last_sample) -> None: ...

    def on_measurement_end(self, row: dict) -> None: ...

    def on_message(self, text: str) -> None: ...

    def on_run_end(self, result) -> None: ...


class NullObserver:
    def on_run_start(self, result, *, total: int) -> None:
        pass

    def on_measurement_start(self, *, kernel: str, input_label: str, repeat: int) -> None:
        pass

    def on_phase(self, phase: str) -> None:
        pass

    def on_chunk(self, chunk, check, last_sample) -> None:
        pass

    def on_measurement_end(self, row: dict) -> None:
        pass

    def on_message(self, text: str) -> None:
        pass

    def on_run_end(self, result) -> None:
        pass
