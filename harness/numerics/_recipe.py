"""A recipe of low-precision attention: what each operand is quantized to, what is done to Q and K first, how P is
formed and normalized, and how the output is accumulated. A kernel declares one (`Kernel.extra["recipe"]`: a
bundled name, a `Recipe`, or its dict), and the gate and `bench error` emulate it (harness.numerics._emulate).

The bundled recipes, after the founding documents (docs/numerics.md "Low-precision numerics"):

| name | Q, K | V | P | notes |
|---|---|---|---|---|
| fp8-lean-zyfa | e4m3, one power-of-two scale per tensor | same | lean e4m3 code per 64-key block | ZYFA |
| mxfp8 | MXFP8 (e4m3, E8M0 per 32 along d) | MXFP8 per 32 keys | MXFP8 per 32 keys | OCP MX |
| qk4v8 | NVFP4 (e2m1, E4M3 per 16 + fp32 per tensor) | e4m3, fp32 scale per tensor | e4m3, static scale (p <= 1 -> 448 p) | MpFA |
| qk4v8-rank1 | NVFP4 of Q - mean(Q), plus mean(Q) K^T in fp32 | as qk4v8 | as qk4v8 | MpFA's rank-1 compensation |
| mxfp4-directp | MXFP4 (e2m1, E8M0 per 32) | MXFP4 per 32 keys | MXFP4 per 32 keys, row sum of unrounded P | FA4 Direct-P |
| nvfp4-directp | NVFP4 | NVFP4 per 16 keys | NVFP4, static per-tensor amax 1, row sum of unrounded P | FA4 Direct-P |

and each of them `+had`: Q and K rotated by the normalized Walsh-Hadamard matrix along the head dim first
(QK^T is unchanged; outlier channels are spread over the block). Every recipe accumulates PV in fp32 per 64-key
block (emulated: each block's product rounded to fp32, added to an fp32 running sum) and writes bf16.

>>> parse_recipe("qk4v8-rank1+had").describe()
'Q nvfp4, K nvfp4, V e4m3:tensor:fp32, P e4m3:tensor:fp32@1 (P relative to the exact row max); Hadamard on Q and K; Q smoothed, mean(Q) K^T added in fp32 (rank-1); divided by the sum of the rounded P; PV accumulated in fp32 per 64 keys; bfloat16 out'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.numerics._scaled import OperandFormat, parse_format

__all__ = ["Recipe", "parse_recipe", "RECIPES", "ZYFA_P", "mutated"]

ZYFA_P = ("lean", "zyfa-exact")  # P as harness.numerics._lean forms it (per p_block keys, offset o, sigma, beta)
_OUT_ROUNDING = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Declared low-precision numerics of an attention kernel (module doc); `None` formats stay unquantized.

    p_max: the maximum P is taken relative to before rounding: "exact" (the row's exact max, as a two-pass
        kernel and the bundled emulations do: the gate then allows only what fp32 arithmetic can move) or
        "running" (an online-softmax kernel's running max: every P may round at another point, and the gate
        allows twice the format's rounding of each P, as for the FP8 kernels).
    row_sum: "rounded" (the sum of the P that multiply V, so the weights sum to one) or "exact" (the sum of the
        fp32 exponentials, formed before P is converted: a rounded-away P is then lost probability mass).
    mma_rel_error: relative error of the tensor cores' accumulation of one MMA (0: exact fp32 products).
    """

    name: str = "custom"
    q: OperandFormat | None = None
    k: OperandFormat | None = None
    v: OperandFormat | None = None
    p: OperandFormat | str | None = None
    p_block: int = 64
    sigma: float = 6.0
    beta: float = 0.35
    hadamard: bool = False
    k_smooth: bool = False
    q_smooth: bool = False
    row_sum: str = "rounded"
    accumulation: str = "fp32"
    acc_block: int = 64
    p_max: str = "exact"
    mma_rel_error: float = 0.0
    out: str = "bfloat16"

    def __post_init__(self) -> None:
        for op in ("q", "k", "v"):
            value = getattr(self, op)
            if value is not None:
                object.__setattr__(self, op, parse_format(value))
        if self.p is not None and self.p not in ZYFA_P:
            object.__setattr__(self, "p", parse_format(self.p))
        checks = (("row_sum", ("rounded", "exact")), ("accumulation", ("fp32", "exact")),
                  ("p_max", ("exact", "running")), ("out", tuple(_OUT_ROUNDING)))
        for field, allowed in checks:
            if getattr(self, field) not in allowed:
                raise ConfigError(f"Recipe {self.name!r}: {field}={getattr(self, field)!r}; one of {', '.join(allowed)}.")
        for field in ("p_block", "acc_block"):
            if not (isinstance(getattr(self, field), int) and getattr(self, field) > 0):
                raise ConfigError(f"Recipe {self.name!r}: {field} must be a positive integer.")

    @property
    def out_rounding(self) -> float:
        """Unit roundoff of the output format (the gate's allowance for the output's own rounding)."""
        return _OUT_ROUNDING[self.out]

    def describe(self) -> str:
        def fmt(f):
            return "unquantized" if f is None else (f if isinstance(f, str) else f.describe())

        p = fmt(self.p) + (f" per {self.p_block} keys" if self.p in ZYFA_P else "")
        parts = [f"Q {fmt(self.q)}, K {fmt(self.k)}, V {fmt(self.v)}, P {p} (P relative to the "
                 f"{'exact row max' if self.p_max == 'exact' else 'running row max'})"]
        if self.hadamard:
            parts.append("Hadamard on Q and K")
        if self.k_smooth:
            parts.append("K smoothed (mean key subtracted)")
        if self.q_smooth:
            parts.append("Q smoothed, mean(Q) K^T added in fp32 (rank-1)")
        parts.append("divided by the sum of the " + ("rounded P" if self.row_sum == "rounded" else "unrounded P"))
        parts.append(f"PV accumulated in fp32 per {self.acc_block} keys" if self.accumulation == "fp32"
                     else "PV accumulated exactly")
        parts.append(f"{self.out} out")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """Plain data (formats as their text), what a run records; `parse_recipe` reads it back."""
        d = dataclasses.asdict(self)
        for op in ("q", "k", "v", "p"):
            f = getattr(self, op)
            d[op] = None if f is None else (f if isinstance(f, str) else f.describe())
        return d


_FP8_TENSOR = "e4m3:tensor:pow2"
_BASE = {
    "fp8-lean-zyfa": dict(q=_FP8_TENSOR, k=_FP8_TENSOR, v=_FP8_TENSOR, p="lean"),
    "mxfp8": dict(q="mxfp8", k="mxfp8", v="mxfp8", p="mxfp8"),
    "qk4v8": dict(q="nvfp4", k="nvfp4", v="e4m3:tensor:fp32", p="e4m3:tensor:fp32@1"),
    "qk4v8-rank1": dict(q="nvfp4", k="nvfp4", v="e4m3:tensor:fp32", p="e4m3:tensor:fp32@1", q_smooth=True),
    "mxfp4-directp": dict(q="mxfp4", k="mxfp4", v="mxfp4", p="mxfp4", row_sum="exact"),
    "nvfp4-directp": dict(q="nvfp4", k="nvfp4", v="nvfp4", p="nvfp4@1", row_sum="exact"),
}
RECIPES: dict[str, Recipe] = {}
for _name, _kw in _BASE.items():
    RECIPES[_name] = Recipe(name=_name, **_kw)
    RECIPES[f"{_name}+had"] = Recipe(name=f"{_name}+had", hadamard=True, **_kw)


def parse_recipe(spec) -> Recipe:
    """A recipe from a bundled name (`RECIPES`), a `Recipe`, or a dict of its fields (formats as text)."""
    if isinstance(spec, Recipe):
        return spec
    if isinstance(spec, str):
        if spec in RECIPES:
            return RECIPES[spec]
        raise ConfigError(f"Unknown recipe {spec!r}; the bundled recipes are {', '.join(RECIPES)}, or declare a "
                          f"harness.numerics.Recipe (or a dict of its fields).")
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {f.name for f in dataclasses.fields(Recipe)})
        if unknown:
            raise ConfigError(f"Recipe fields {unknown} are unknown; the fields are "
                              f"{', '.join(f.name for f in dataclasses.fields(Recipe))}.")
        return Recipe(**spec)
    raise ConfigError(f"A recipe is a bundled name, a harness.numerics.Recipe or a dict, not {type(spec).__name__}.")


def mutated(recipe: Recipe, **changes) -> Recipe:
    """The recipe with some fields changed (tests and the gate's mutation checks), named so."""
    name = recipe.name + "~" + ",".join(f"{k}={v}" for k, v in changes.items())
    return dataclasses.replace(recipe, name=name, **changes)
