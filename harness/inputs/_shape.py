from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["AttentionShape", "DTYPES", "torch_dtype"]

# Names users type, mapped to torch dtype attribute names. Kept as strings so that specs and results
# never need torch imported to be read.
_ALIASES = {
    "bfloat16": ("bf16",), "float16": ("fp16",), "float32": ("fp32",), "float64": ("fp64",),
    "float8_e4m3fn": ("fp8", "e4m3"),
}
DTYPES = {alias: name for name, aliases in _ALIASES.items() for alias in (name, *aliases)}


def torch_dtype(name: str):
    """The torch dtype for a dtype name (`bf16`, `bfloat16`, `fp8`, ...)."""
    import torch

    try:
        return getattr(torch, DTYPES[name])
    except KeyError:
        known = ", ".join(sorted(set(DTYPES)))
        raise ConfigError(f"Unknown dtype {name!r}. Use one of: {known}.") from None


@dataclass(frozen=True, kw_only=True)
class AttentionShape:
    """Shape of one attention call: q [B, Hq, S, dqk], k [B, Hkv, S, dqk], v [B, Hkv, S, dv]."""

    batch: int
    heads_q: int
    heads_kv: int
    seq_len: int
    head_dim_qk: int
    head_dim_v: int | None = None
    causal: bool = True

    def __post_init__(self) -> None:
        if self.head_dim_v is None:
            object.__setattr__(self, "head_dim_v", self.head_dim_qk)
        for field in ("batch", "heads_q", "heads_kv", "seq_len", "head_dim_qk", "head_dim_v"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"Attention shape field {field} must be a positive integer, got {value!r}.")
        if self.heads_q % self.heads_kv:
            raise ConfigError(
                f"Hq={self.heads_q} is not a multiple of Hkv={self.heads_kv}: grouped-query attention needs "
                f"each KV head shared by the same number of query heads. Pick Hkv among the divisors of "
                f"{self.heads_q}, e.g. --heads-kv {self.heads_q}."
            )

    @property
    def flops(self) -> int:
        """FLOPs of one call: both products over the causal half (or the full score matrix)."""
        full = 2 * self.batch * self.heads_q * self.seq_len**2 * (self.head_dim_qk + self.head_dim_v)
        return full // 2 if self.causal else full

    def q_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads_q, self.seq_len, self.head_dim_qk)

    def k_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads_kv, self.seq_len, self.head_dim_qk)

    def v_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads_kv, self.seq_len, self.head_dim_v)

    def label(self) -> str:
        dims = f"d{self.head_dim_qk}" if self.head_dim_qk == self.head_dim_v else f"d{self.head_dim_qk}/{self.head_dim_v}"
        return (
            f"B{self.batch} H{self.heads_q}/{self.heads_kv} S{self.seq_len} {dims}"
            f"{' causal' if self.causal else ''}"
        )
