"""`CaptureConfig`: what one capture asks for, checked on creation (the capture and its manifest both read it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.capture._device import default_capture_dtype
from harness.capture._models import DEFAULT_MODEL, ModelSpec
from harness.capture._text import DEFAULT_TEXT
from harness.errors import ConfigError
from harness.inputs import DTYPES

__all__ = ["CaptureConfig", "TOLERANCE", "parse_layers"]

# Self-check tolerance on max |recomputed - model output|, relative to max(1, max |output|). fp32: the
# two computations differ only in summation order; bf16/fp16: the model's output is rounded to 8/11 bits.
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 4e-3}


def parse_layers(text: str | int | tuple | list) -> tuple[int, ...]:
    """`"20,3"` -> (3, 20): sorted, without duplicates.

    >>> parse_layers("20,3,3")
    (3, 20)
    """
    items = text.split(",") if isinstance(text, str) else ([text] if isinstance(text, int) else list(text))
    try:
        layers = sorted({int(x) for x in items if str(x).strip() != ""})
    except ValueError:
        raise ConfigError(f"Layers {text!r} must be integers separated by commas, e.g. --layers 3,15.") from None
    if not layers:
        raise ConfigError("Give at least one layer to capture, e.g. --layers 3,15.")
    return tuple(layers)


@dataclass(frozen=True, kw_only=True)
class CaptureConfig:
    """One capture: which model, which layers, how many tokens of which text, where to write.

    `batch` consecutive windows of the text are stacked along the batch (one per row), so one attention
    call covers them all. `dtype` None: bf16 on a GPU, fp32 on the CPU. `random_weights` builds the
    registered architecture at full size with seeded random weights (no download); such captures are
    labelled and live under captures/<model>-random-seed<N>/. `recapture` lets a damaged layer file be
    overwritten; without it a damaged file is refused. `decode_steps` N > 0: the last N of the `seq_len`
    tokens are the model's own greedy continuation of the first S - N, decoded one token a forward pass with
    its KV cache, and q holds only those N steps' queries (`harness.capture._decode`).
    """

    model: str | ModelSpec = DEFAULT_MODEL
    layers: tuple[int, ...] = (3, 15)
    seq_len: int = 2048
    text: str = DEFAULT_TEXT
    weights: str | Path | None = None
    root: Path = Path("captures")
    batch: int = 1  # consecutive windows of the text, one per batch row
    dtype: str | None = None  # of the forward pass; None: default_capture_dtype(device)
    device: str = "cpu"
    tolerance: float | None = None  # None: TOLERANCE[dtype]
    random_weights: bool = False
    seed: int = 0  # of the random weights
    recapture: bool = False
    decode_steps: int = 0  # 0: one forward pass over the text (prefill); N: N greedy decode steps

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", parse_layers(self.layers))
        object.__setattr__(self, "root", Path(self.root))
        if self.dtype is None:
            object.__setattr__(self, "dtype", default_capture_dtype(self.device))
        if self.random_weights and self.weights is not None:
            raise ConfigError("--random-weights builds the model without weights; drop --weights (or --random-weights).")
        for flag, name in (("--seq-len", "seq_len"), ("--windows", "batch")):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{flag} {value!r}: must be a positive integer.")
        if not isinstance(self.decode_steps, int) or not 0 <= self.decode_steps < self.seq_len:
            raise ConfigError(f"--decode-steps {self.decode_steps!r}: the decoded tokens are the last of the "
                              f"--seq-len {self.seq_len} the cache holds, after a prompt of at least one token; give "
                              f"0 (a prefill capture) up to {self.seq_len - 1}.")
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"--captures {self.root} is a file; --captures names the folder captures are read from "
                              f"and written to (default captures/). Pass a folder.")
        # The short names every other command takes (bf16, fp32, fp16) are the same dtypes.
        given = self.dtype
        object.__setattr__(self, "dtype", DTYPES.get(self.dtype, self.dtype))
        if self.dtype not in TOLERANCE:
            raise ConfigError(f"--dtype {given!r}: a capture's forward pass runs in bf16 (bfloat16), fp16 "
                              f"(float16) or fp32 (float32). Pass one of those.")
