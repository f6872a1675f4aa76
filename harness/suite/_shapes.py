"""The shape options as typed (`ShapeArgs`) and the AttentionShapes they describe: one, or a sweep over lists of
values; MLA's fixed dims; the nightly job's synthetic shape."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.inputs import AttentionShape, varlen_lengths
from harness.suite._checks import positive
from harness.suite._devices import default_seq_len

__all__ = ["DEFAULT_SEED", "NIGHTLY_HEADS", "SHAPE_DEFAULTS", "ShapeArgs", "seq_lens",
           "MLA_DIMS", "attention_shape", "attention_shapes", "nightly_shape", "nightly_shape_args",
           "off_value"]


# The seed of --varlen lengths (and of every synthetic input) unless --seed says otherwise.
DEFAULT_SEED = 0
# The shape of a synthetic input where its option is not given (S: `default_seq_len`, by device; Hkv: Hq; dv: dqk).
SHAPE_DEFAULTS = dict(batch=1, heads=32, head_dim=128, causal=True)

# The nightly job's synthetic suite: grouped-query attention (32 query heads over 8 KV heads), the layout
# of the 7-8B models it stands in for.
NIGHTLY_HEADS = (32, 8)


def nightly_shape(device: str, *, seq_len: int | None = None, heads=None, heads_kv=None) -> AttentionShape:
    """The nightly job's synthetic shape on this device: 32/8 heads unless --heads / --heads-kv say otherwise
    (--heads alone: Hkv = Hq, as in `bench sustained`)."""
    hq, hkv = NIGHTLY_HEADS
    if heads is not None and heads_kv is None:
        hkv = None
    return attention_shape(ShapeArgs(heads=hq if heads is None else heads, heads_kv=hkv if heads_kv is None else heads_kv,
                                     seq_len=seq_len), device=device)


def nightly_shape_args(args: "ShapeArgs") -> "ShapeArgs":
    """The shape options of `bench nightly` on synthetic inputs: `bench sustained`'s, with the nightly suite's 32 / 8
    heads where neither --heads nor --heads-kv (nor --mla) was given."""
    if args.heads is None and args.heads_kv is None and not args.mla:
        return dataclasses.replace(args, heads=NIGHTLY_HEADS[0], heads_kv=NIGHTLY_HEADS[1])
    return args


# The shape options in the order a sweep varies them (the last fastest), each with its flag and its short
# name in the label of a sweep point.
_SWEEP = (("batch", "--batch", "B"), ("heads", "--heads", "Hq"), ("heads_kv", "--heads-kv", "Hkv"),
          ("seq_len", "--seq-len", "S"), ("seq_len_q", "--seq-len-q", "Sq"), ("seq_len_kv", "--seq-len-kv", "Skv"),
          ("head_dim", "--head-dim", "d"), ("head_dim_v", "--head-dim-v", "dv"), ("window", "--window", "window"),
          ("page_size", "--page-size", "page"), ("varlen", "--varlen", "varlen"))
_FLAGS = {name: flag for name, flag, _ in _SWEEP}
# Options that may say `none` in a list: the feature off at that point of the sweep.
_OFF = ("window", "page_size", "varlen")


@dataclass(frozen=True, kw_only=True)
class ShapeArgs:
    """The shape options as typed (None = the default: B=1, Hq=32, Hkv=Hq, S by device, d=128, causal, no
    window, no paging, no varlen). Each size may be a tuple of values: a sweep over their product
    (`attention_shapes`). S_kv is --seq-len-kv, else --seq-len, else the device's default; S_q is --seq-len-q,
    else --seq-len, else S_kv (so `--seq-len-q 1 --seq-len 4096` is one decode step against 4096 keys)."""

    batch: int | tuple[int, ...] | None = None
    heads: int | tuple[int, ...] | None = None
    heads_kv: int | tuple[int, ...] | None = None
    seq_len: int | tuple[int, ...] | None = None
    seq_len_q: int | tuple[int, ...] | None = None
    seq_len_kv: int | tuple[int, ...] | None = None
    head_dim: int | tuple[int, ...] | None = None
    head_dim_v: int | tuple[int, ...] | None = None
    causal: bool | None = None
    window: int | str | tuple | None = None  # a size, or "none" in a sweep
    page_size: int | str | tuple | None = None
    varlen: str | tuple[str, ...] | None = None  # harness.inputs.VARLEN_FORMS
    mla: bool | None = None  # MLA_DIMS: DeepSeek's absorbed MLA (Hkv 1, latent K of 576 dims, V its first 512)

    def __post_init__(self) -> None:
        if self.mla is False:  # the CLI's flag off: not given
            object.__setattr__(self, "mla", None)
        for name, _, _ in _SWEEP:
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(value)
            if isinstance(value, tuple):
                value = None if not value else (value[0] if len(value) == 1 else value)
            object.__setattr__(self, name, value)

    def given(self, *, but: tuple[str, ...] = ()) -> list[str]:
        """The flags given, as typed."""
        return [f"--{f.name.replace('_', '-')}" if f.name != "causal" else "--causal/--no-causal"
                for f in dataclasses.fields(self) if getattr(self, f.name) is not None and f.name not in but]

    def swept(self) -> list[str]:
        """The flags given more than one value."""
        return [flag for name, flag, _ in _SWEEP if isinstance(getattr(self, name), tuple)]

    def one(self, name: str):
        """The single value of option `name` (None: not given); a list is refused, naming the flag."""
        value = getattr(self, name)
        if isinstance(value, tuple):
            raise ConfigError(f"{_FLAGS[name]} {','.join(map(str, value))}: this command takes one value of "
                              f"{_FLAGS[name]}. A list of values (a sweep) is taken by `bench sustained`, `bench error` "
                              f"and `bench repro` on synthetic inputs.")
        return value


def seq_lens(seq_len, seq_len_q, seq_len_kv, *, default):
    """(S_q, S_kv) of one shape, the one rule every command uses: S_kv is --seq-len-kv, else --seq-len, else `default`
    (the device's S, or the model's); S_q is --seq-len-q, else --seq-len, else S_kv. --seq-len and --seq-len-kv both
    given is refused (both say the keys per sequence). None stays None where `default` is None."""
    if seq_len is not None and seq_len_kv is not None:
        raise ConfigError("--seq-len and --seq-len-kv both give the keys per sequence: give --seq-len-kv (with "
                          "--seq-len-q for the queries), or --seq-len alone for self-attention.")
    s_kv = seq_len_kv if seq_len_kv is not None else seq_len if seq_len is not None else default
    return (seq_len_q if seq_len_q is not None else seq_len if seq_len is not None else s_kv), s_kv


def _values(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def off_value(name: str, value):
    """'none' in a list of --window / --page-size / --varlen: the feature off there."""
    if isinstance(value, str) and value.strip().lower() == "none":
        if name not in _OFF:
            raise ConfigError(f"{_FLAGS[name]} none: only --window, --page-size and --varlen can be switched off in a "
                              f"list. Give {_FLAGS[name]} a size.")
        return None
    if name in ("window", "page_size") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{_FLAGS[name]} {value!r} is not a size: give an integer, or none.") from None
    return value


def attention_shapes(args: ShapeArgs, *, device: str, model: bool = False, seed: int = DEFAULT_SEED
                     ) -> tuple[tuple[AttentionShape, str], ...]:
    """Every (AttentionShape, label of its sweep point) the options describe: the product of the values of every
    list-valued option (the label names those, e.g. "B8 Skv4096 page16"; "" without a sweep). Sizes of 0 or less
    are refused with their flag's name; --varlen lengths are drawn with `seed` (--seed)."""
    seq_lens(args.seq_len, None, args.seq_len_kv, default=None)  # the conflict, before any sweep point
    for name, flag, _ in _SWEEP:
        if name != "varlen":
            for value in _values(getattr(args, name)):
                positive(off_value(name, value), flag)
    swept = {name for name, _, _ in _SWEEP if isinstance(getattr(args, name), tuple)}
    out = []
    for point in itertools.product(*(_values(getattr(args, name)) for name, _, _ in _SWEEP)):
        v = {name: off_value(name, x) for (name, _, _), x in zip(_SWEEP, point)}
        label = " ".join(f"{short}{v[name] if v[name] is not None else ' none'}" if name != "varlen"
                         else f"varlen {v[name] or 'none'}" for name, _, short in _SWEEP if name in swept)
        heads = (MLA_DIMS["heads"] if args.mla else SHAPE_DEFAULTS["heads"]) if v["heads"] is None else v["heads"]
        s_q, s_kv = seq_lens(v["seq_len"], v["seq_len_q"], v["seq_len_kv"], default=default_seq_len(device, model=model))
        batch = SHAPE_DEFAULTS["batch"] if v["batch"] is None else v["batch"]
        dims = _mla_dims(v) if args.mla else dict(
            heads_kv=heads if v["heads_kv"] is None else v["heads_kv"],
            head_dim_qk=SHAPE_DEFAULTS["head_dim"] if v["head_dim"] is None else v["head_dim"],
            head_dim_v=v["head_dim_v"])
        try:
            lengths, how = varlen_lengths(v["varlen"], batch=batch, seq_len_kv=s_kv, seed=seed) if v["varlen"] else (
                None, None)
            shape = AttentionShape(
                batch=batch, heads_q=heads, seq_len=s_q, seq_len_kv=s_kv, **dims,
                causal=SHAPE_DEFAULTS["causal"] if args.causal is None else args.causal, window=v["window"],
                page_size=v["page_size"], kv_lens=lengths, varlen=how)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (sweep point {label})" if label else str(exc)) from None
        out.append((shape, label))
    return tuple(out)


# DeepSeek-V2/V3's attention in the absorbed form decode kernels run (FlashMLA): 128 query heads (a TP slice has
# fewer), one latent KV head whose 576 dims are the 512-dim compressed KV and the 64-dim RoPE key, V its first 512.
MLA_DIMS = dict(heads=128, heads_kv=1, head_dim_qk=576, head_dim_v=512)


def _mla_dims(point: dict) -> dict:
    fixed = [_FLAGS[n] for n in ("heads_kv", "head_dim", "head_dim_v") if point[n] is not None]
    if fixed:
        raise ConfigError(f"--mla fixes Hkv 1, dqk 576 and dv 512 (DeepSeek's latent cache); drop {', '.join(fixed)}, "
                          f"or drop --mla and give the dims yourself (then K and V are separate tensors).")
    return dict(heads_kv=1, head_dim_qk=MLA_DIMS["head_dim_qk"], head_dim_v=MLA_DIMS["head_dim_v"], latent_kv=True)


def attention_shape(args: ShapeArgs, *, device: str, model: bool = False,
                    seed: int = DEFAULT_SEED) -> AttentionShape:
    """The one AttentionShape the options describe (a sweep, a list of values, is refused by flag)."""
    for name, _, _ in _SWEEP:
        args.one(name)
    return attention_shapes(args, device=device, model=model, seed=seed)[0][0]
