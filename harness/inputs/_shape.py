from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["AttentionShape", "DTYPES", "FEATURES", "torch_dtype"]

# Names users type, mapped to torch dtype attribute names. Kept as strings so that specs and results
# never need torch imported to be read.
_ALIASES = {
    "bfloat16": ("bf16",), "float16": ("fp16",), "float32": ("fp32",), "float64": ("fp64",),
    "float8_e4m3fn": ("fp8", "e4m3"),
}
DTYPES = {alias: name for name, aliases in _ALIASES.items() for alias in (name, *aliases)}

# What a workload asks of a kernel beyond dense self-attention (S_q = S_kv), with the flag that asks for it.
# A kernel declares the ones it computes (`Kernel.workloads`) and is refused the others by name.
FEATURES = {
    "decode": "S_q < S_kv (--seq-len-q below --seq-len-kv: decode or a chunk of prefill against a KV cache)",
    "window": "a sliding window (--window)",
    "paged": "a paged KV cache (--page-size)",
    "varlen": "sequences of different lengths (--varlen)",
}


def torch_dtype(name: str):
    """The torch dtype for a dtype name (`bf16`, `bfloat16`, `fp8`, ...)."""
    import torch

    try:
        return getattr(torch, DTYPES[name])
    except KeyError:
        known = ", ".join(sorted(set(DTYPES)))
        raise ConfigError(f"Unknown dtype {name!r}. Use one of: {known}.") from None


def _sum_min(a: int, b: int, c: int, cap: int) -> int:
    """sum over p = a..b of min(p + c, cap), in closed form (b >= a - 1)."""
    t = min(b, cap - c)  # p + c <= cap up to here
    below = (t - a + 1) * (a + t) // 2 + c * (t - a + 1) if t >= a else 0
    return below + cap * (b - max(t, a - 1))


def _sum_max(a: int, b: int, c: int, floor: int) -> int:
    """sum over p = a..b of max(p + c, floor), in closed form (b >= a - 1)."""
    t = max(a, floor - c)  # p + c >= floor from here
    above = (b - t + 1) * (t + b) // 2 + c * (b - t + 1) if t <= b else 0
    return above + floor * (min(b, t - 1) - a + 1 if t - 1 >= a else 0)


@dataclass(frozen=True, kw_only=True)
class AttentionShape:
    """Shape of one attention call: a batch of sequences, each with its queries and its KV cache.

    batch B, heads_q Hq, heads_kv Hkv (GQA: Hq a multiple of Hkv), head_dim_qk / head_dim_v.
    seq_len S_q: queries per sequence, the LAST S_q tokens of it (under varlen: at most S_q, see below).
    seq_len_kv S_kv: keys per sequence (None: S_q, self-attention); under varlen the most a sequence has.
    causal: query i of a sequence of L keys sits at position L - S_q + i and sees the keys up to it (the causal
        mask aligned to the end of the KV cache: FlashAttention's bottom-right convention; for S_q = S_kv the
        usual lower triangle).
    window W: each query sees at most W keys: its own position and the W - 1 before it (and, not causal, the
        W - 1 after it); None: no window.
    page_size P: K and V live in a pool of P-token pages in shuffled order, found through a page table.
    kv_lens: under varlen, each sequence's KV length (1..S_kv); its queries are its last min(S_q, L) tokens.
        `varlen` says how the lengths were chosen (recorded with the run).
    latent_kv: MLA's absorbed form (DeepSeek-V2/V3 decode): each token caches one latent vector of head_dim_qk
        dims (512 latent + 64 RoPE in DeepSeek) per KV head, K is that vector and V its first head_dim_v dims, so
        v is a view of k and the cache is read once (`bytes_moved`); FLOPs are those of dqk and dv as usual.

    Tensors (`q_shape`, `k_shape`, `out_shape`; v as k with head_dim_v):
    - dense: q [B, Hq, S_q, dqk], k [B, Hkv, S_kv, dqk], out [B, Hq, S_q, dv];
    - varlen: tokens packed along S with B = 1, sequence b at rows cu_seqlens[b]:cu_seqlens[b + 1]:
      q [1, Hq, total_q, dqk], k [1, Hkv, total_kv, dqk], out [1, Hq, total_q, dv];
    - paged: k [num_pages, P, Hkv, dqk] (FlashAttention's and vLLM's page layout), page_table [B, max_pages]
      int32 and kv_lens [B] int32; q and out as above.
    """

    batch: int
    heads_q: int
    heads_kv: int
    seq_len: int
    head_dim_qk: int
    head_dim_v: int | None = None
    causal: bool = True
    seq_len_kv: int | None = None
    window: int | None = None
    page_size: int | None = None
    kv_lens: tuple[int, ...] | None = None
    varlen: str | None = None
    latent_kv: bool = False

    def __post_init__(self) -> None:
        if self.head_dim_v is None:
            object.__setattr__(self, "head_dim_v", self.head_dim_qk)
        if self.seq_len_kv is None:
            object.__setattr__(self, "seq_len_kv", self.seq_len)
        if self.kv_lens is not None:
            object.__setattr__(self, "kv_lens", tuple(self.kv_lens))  # a list from JSON
        for field in ("batch", "heads_q", "heads_kv", "seq_len", "head_dim_qk", "head_dim_v", "seq_len_kv"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"Attention shape field {field} must be a positive integer, got {value!r}.")
        for field, flag in (("window", "--window"), ("page_size", "--page-size")):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise ConfigError(f"{flag} {value!r}: must be a positive integer (leave it out for none).")
        if self.latent_kv and self.head_dim_v > self.head_dim_qk:
            raise ConfigError(f"--mla: V is the first dv dims of the latent K, so dv={self.head_dim_v} cannot exceed "
                              f"dqk={self.head_dim_qk}.")
        if self.heads_q % self.heads_kv:
            raise ConfigError(
                f"Hq={self.heads_q} is not a multiple of Hkv={self.heads_kv}: grouped-query attention needs "
                f"each KV head shared by the same number of query heads. Pick Hkv among the divisors of "
                f"{self.heads_q}, e.g. --heads-kv {self.heads_q}."
            )
        if self.seq_len > self.seq_len_kv:
            raise ConfigError(
                f"S_q={self.seq_len} queries against S_kv={self.seq_len_kv} keys: the queries are the last tokens of "
                f"their sequence, so there cannot be more of them than keys. Give --seq-len-q <= --seq-len-kv.")
        if self.kv_lens is None:
            if self.varlen is not None:
                raise ConfigError(f"varlen {self.varlen!r} names no lengths: give kv_lens, one per sequence.")
            return
        if self.varlen is None:
            object.__setattr__(self, "varlen", "given")
        if len(self.kv_lens) != self.batch:
            raise ConfigError(f"--varlen gives {len(self.kv_lens)} sequence lengths for --batch {self.batch}: give "
                              f"one length per sequence.")
        bad = [n for n in self.kv_lens if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= self.seq_len_kv]
        if bad:
            raise ConfigError(f"--varlen lengths {bad[:4]} are outside 1..{self.seq_len_kv} (--seq-len-kv, the longest "
                              f"a sequence may be).")

    # What the workload asks of a kernel, and its lengths.
    def features(self) -> frozenset[str]:
        """The FEATURES this shape uses (empty: dense self-attention, what every kernel computes)."""
        return frozenset(f for f, on in (("decode", self.seq_len != self.seq_len_kv), ("window", self.window is not None),
                                         ("paged", self.page_size is not None), ("varlen", self.kv_lens is not None))
                         if on)

    @property
    def packed(self) -> bool:
        """Tokens packed along S with B = 1 (varlen), each sequence at its cu_seqlens rows."""
        return self.kv_lens is not None

    @property
    def paged(self) -> bool:
        return self.page_size is not None

    def kv_lengths(self) -> tuple[int, ...]:
        return self.kv_lens if self.kv_lens is not None else (self.seq_len_kv,) * self.batch

    def q_lengths(self) -> tuple[int, ...]:
        return tuple(min(self.seq_len, n) for n in self.kv_lengths())

    def pages_per_sequence(self) -> tuple[int, ...]:
        return tuple(-(-n // self.page_size) for n in self.kv_lengths()) if self.paged else ()

    @property
    def max_pages(self) -> int:
        """Width of the page table: the pages of a sequence of S_kv tokens."""
        return -(-self.seq_len_kv // self.page_size) if self.paged else 0

    @property
    def num_pages(self) -> int:
        """Pages in the pool: those the sequences use and an eighth more (at least one) that none does, as a
        serving engine's pool is never exactly full; the page table's unused entries point at those."""
        if not self.paged:
            return 0
        used = sum(self.pages_per_sequence())
        return used + max(1, used // 8)

    # Tensor shapes.
    def q_shape(self) -> tuple[int, int, int, int]:
        if self.packed:
            return (1, self.heads_q, sum(self.q_lengths()), self.head_dim_qk)
        return (self.batch, self.heads_q, self.seq_len, self.head_dim_qk)

    def _kv_shape(self, d: int) -> tuple[int, int, int, int]:
        if self.paged:
            return (self.num_pages, self.page_size, self.heads_kv, d)
        if self.packed:
            return (1, self.heads_kv, sum(self.kv_lengths()), d)
        return (self.batch, self.heads_kv, self.seq_len_kv, d)

    def k_shape(self) -> tuple[int, int, int, int]:
        return self._kv_shape(self.head_dim_qk)

    def v_shape(self) -> tuple[int, int, int, int]:
        return self._kv_shape(self.head_dim_v)

    def out_shape(self) -> tuple[int, int, int, int]:
        q = self.q_shape()
        return (q[0], q[1], q[2], self.head_dim_v)

    # Accounting.
    def _visible(self, lq: int, lkv: int) -> tuple[int, int]:
        """(visible (query, key) pairs, distinct keys any query sees) of one sequence."""
        off, w = lkv - lq, self.window
        a, b = off, lkv - 1  # the queries' positions
        if self.causal:
            pairs = _sum_min(a, b, 1, w) if w else (lq * (a + b + 2)) // 2
            keys = lkv - max(0, off - w + 1) if w else lkv
        elif w:
            pairs = _sum_min(a, b, w - 1, lkv - 1) - _sum_max(a, b, 1 - w, 0) + lq
            keys = min(lkv - 1, b + w - 1) - max(0, a - w + 1) + 1
        else:
            pairs, keys = lq * lkv, lkv
        return pairs, keys

    @property
    def flops(self) -> int:
        """FLOPs of one call: 2 (dqk + dv) per visible (query, key) pair per query head (both products), the
        pair of a causal query with its own key counting half. That keeps the protocol's B Hq S^2 (dqk + dv) for
        causal self-attention (FlashAttention's and tritonbench's convention: half the score matrix) and gives
        FlashAttention's S_q (S_kv - S_q / 2) per sequence under decode; windows and lengths are counted exactly."""
        total = 0
        for lq, lkv in zip(self.q_lengths(), self.kv_lengths()):
            pairs, _ = self._visible(lq, lkv)
            total += 2 * pairs - (lq if self.causal else 0)
        return total * self.heads_q * (self.head_dim_qk + self.head_dim_v)

    def bytes_moved(self, *, item: int, out_item: int) -> int:
        """The least memory traffic of one call, in bytes: q read, each KV head's visible keys and values read
        once (a window's band only; GQA shares them between query heads), the output written, and the page
        table entries and lengths used. `item`: bytes per q, k, v element; `out_item` per output element."""
        q = out = kv = 0
        for lq, lkv in zip(self.q_lengths(), self.kv_lengths()):
            _, keys = self._visible(lq, lkv)
            q += lq * self.heads_q * self.head_dim_qk
            out += lq * self.heads_q * self.head_dim_v
            kv += keys * self.heads_kv * (self.head_dim_qk + (0 if self.latent_kv else self.head_dim_v))
        index = 0
        if self.paged:
            index += 4 * (sum(self.pages_per_sequence()) + self.batch)
        if self.packed:
            index += 4 * 2 * (self.batch + 1) + (0 if self.paged else 4 * self.batch)
        return item * (q + kv) + out_item * out + index

    def label(self) -> str:
        dims = f"d{self.head_dim_qk}" if self.head_dim_qk == self.head_dim_v else f"d{self.head_dim_qk}/{self.head_dim_v}"
        seq = (f"S{self.seq_len}" if self.seq_len == self.seq_len_kv and self.kv_lens is None
               else f"Sq{self.seq_len} Skv{self.seq_len_kv}")
        extra = "".join(f" {t}" for t, on in ((f"window{self.window}", self.window), (f"page{self.page_size}", self.paged),
                                               (f"varlen {self.varlen}", self.kv_lens is not None),
                                               ("mla-latent", self.latent_kv)) if on)
        return f"B{self.batch} H{self.heads_q}/{self.heads_kv} {seq} {dims}{' causal' if self.causal else ''}{extra}"
