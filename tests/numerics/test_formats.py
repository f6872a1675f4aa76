"""Each quantizer of harness.numerics against a brute-force enumeration of its grid and rounding.

The grids here are built from the specs' tables, not from the module: e4m3 and e5m2 from OFP8 rev. 1.0 (e4m3:
bias 7, only S.1111.111 NaN, largest 448; e5m2: bias 15, the top exponent Inf/NaN, largest 57344), e2m1 from OCP
MX v1.0 (bias 1, the eight values 0, 0.5, 1, 1.5, 2, 3, 4, 6, no Inf or NaN). Rounding is checked by search: the
nearest signed grid value, a tie going to the code with an even last mantissa bit, values beyond the largest
saturating (the module's documented choice). The scaled formats (MX, NVFP4) are checked against a per-block
re-derivation in Python floats, with numpy's float32 for the steps NVIDIA's recipe does in fp32.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.numerics import codes, e8m0_exponent, grid, parse_format, quantize, round_to

E2M1_TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _spec_grid(ebits, mbits, bias, reserved):
    """(value, code) of every non-negative finite code, written from the spec's field layout."""
    out = []
    for code in range(1 << (ebits + mbits)):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if reserved(e, m):
            continue
        value = (m / 2**mbits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2**mbits) * 2.0 ** (e - bias)
        out.append((value, code))
    return sorted(out)


SPEC = {
    "e4m3": _spec_grid(4, 3, 7, lambda e, m: e == 15 and m == 7),
    "e5m2": _spec_grid(5, 2, 15, lambda e, m: e == 31),
    "e2m1": _spec_grid(2, 1, 1, lambda e, m: False),
}


def test_grids_are_the_specs():
    assert grid("e2m1") == E2M1_TABLE
    for name, spec in SPEC.items():
        assert codes(name) == spec, name
    assert max(grid("e4m3")) == 448 and len(grid("e4m3")) == 127  # 128 codes, one NaN
    assert max(grid("e5m2")) == 57344 and len(grid("e5m2")) == 124  # Inf and three NaNs
    assert min(v for v in grid("e4m3") if v > 0) == 2.0**-9 and min(v for v in grid("e5m2") if v > 0) == 2.0**-16


def _brute(x: float, name: str) -> float:
    """Nearest value of the signed grid, ties to the even code, beyond the largest saturating."""
    table = SPEC[name]
    top = table[-1][0]
    if math.isnan(x):
        return math.nan
    if abs(x) > top:
        return math.copysign(top, x) if math.isfinite(x) or name != "e5m2" else x
    a = abs(x)
    best = min(table, key=lambda vc: (abs(vc[0] - a), vc[1] & 1))  # the distance, then the even code
    return math.copysign(best[0], x)


def _probes(name: str, rng) -> list[float]:
    """Every grid value, every exact midpoint between neighbours (the ties), a hair either side of each, random
    values over the whole range and past it, and the signs."""
    g = [v for v, _ in SPEC[name]]
    mids = [(a + b) / 2 for a, b in zip(g, g[1:])]
    hairs = [m * (1 + s * 2.0**-40) for m in mids for s in (-1, 1)]
    top = g[-1]
    rand = list(np.exp(rng.uniform(math.log(g[1] / 4), math.log(top * 4), 400)))
    pos = g + mids + hairs + rand + [top * 1.01, top * 100, g[1] / 3]
    return pos + [-x for x in pos]


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "e2m1"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_round_to_nearest_even_with_saturation_matches_brute_force(name, dtype):
    rng = np.random.default_rng(7)
    xs = [x for x in _probes(name, rng) if dtype == torch.float64 or float(np.float32(x)) == x or True]
    t = torch.tensor(xs, dtype=dtype)
    want = torch.tensor([_brute(float(x), name) for x in t.tolist()], dtype=dtype)  # the probes as that dtype holds them
    got = round_to(t, name)
    assert torch.equal(got, want), [(float(a), float(b), float(c)) for a, b, c in zip(t, got, want) if b != c][:5]


@pytest.mark.parametrize("name,torch_dtype", [("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)])
def test_fp8_rounding_agrees_with_torch_inside_the_range(name, torch_dtype):
    """A second, independent implementation: torch's own casts (round to nearest even; they differ from ours only
    past the largest value, where torch gives NaN / Inf and the OFP8 saturating mode, chosen here, clamps)."""
    x = torch.randn(20000, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3.0 ** torch.randint(
        -12, 9, (20000,), generator=torch.Generator().manual_seed(2)).double()
    x = x[x.abs() <= max(grid(name))]
    assert torch.equal(round_to(x.float(), name), x.float().to(torch_dtype).float())


def test_non_finite_values_stay_non_finite():
    x = torch.tensor([math.nan, math.inf, -math.inf, 1e9])
    assert round_to(x, "e2m1").tolist()[3] == 6.0 and all(math.isnan(v) for v in round_to(x, "e2m1").tolist()[:3])
    assert math.isnan(round_to(x, "e4m3")[1]) and round_to(x, "e5m2")[2] == -math.inf and round_to(x, "e5m2")[3] == 57344


def _floor_log2(a: float) -> int:
    return math.frexp(a)[1] - 1


def test_e8m0_shared_exponent_is_floor_log2_minus_emax_clamped():
    amax = torch.tensor([1.0, 1.5, 2.0, 6.0, 7.99, 448.0, 500.0, 2.0**-130, 0.0, 2.0**200, math.nan], dtype=torch.float64)
    for name, emax in (("e2m1", 2), ("e4m3", 8), ("e5m2", 15)):
        got = e8m0_exponent(amax, name).tolist()
        for a, g in zip(amax.tolist(), got):
            if math.isnan(a):
                assert math.isnan(g)
                continue
            want = -127 if a == 0 else min(127, max(-127, _floor_log2(a) - emax))
            assert g == want, (name, a, g, want)


@pytest.mark.parametrize("spec,element,block,emax", [("mxfp4", "e2m1", 32, 2), ("mxfp8", "e4m3", 32, 8),
                                                     ("mxfp8e5", "e5m2", 32, 15), ("mxfp4:16", "e2m1", 16, 2)])
def test_mx_block_quantization_matches_a_per_block_rederivation(spec, element, block, emax):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 96, generator=g, dtype=torch.float64) * torch.rand(3, 5, 1, generator=g).double() * 40
    x[0, 0, :block] = 0.0  # an all-zero block
    x[1, 1, 7] = 1e4  # an outlier that sets its block's scale
    got = quantize(x, spec, axis=-1)
    flat, out = x.reshape(-1, block).tolist(), []
    for blk in flat:
        amax = max(abs(v) for v in blk)
        shared = -127 if amax == 0 else _floor_log2(amax) - emax
        out.append([_brute(v / 2.0**shared, element) * 2.0**shared for v in blk])
    assert torch.equal(got, torch.tensor(out, dtype=torch.float64).reshape(x.shape))


def test_mx_blocks_run_along_the_named_axis():
    x = torch.zeros(64, 4, dtype=torch.float64)
    x[:, 0] = torch.linspace(-1, 1, 64)
    x[5, 1] = 100.0  # the keys axis (dim 0) holds V's blocks: one scale per 32 keys per channel
    along_keys = quantize(x, "mxfp4", axis=0)
    assert torch.equal(along_keys[:32, 0], quantize(x[:32, 0], "mxfp4", axis=0))
    assert along_keys[5, 1] == 96.0 and along_keys[40, 1] == 0.0


def _f32(x):
    return float(np.float32(x))


def test_nvfp4_two_level_scale_matches_nvidias_recipe_step_by_step():
    """s_enc = 448 * 6 / amax_tensor (fp32); per 16: s_dec = e4m3(amax_block / 6 * s_enc) (fp32, then e4m3);
    element e2m1(x * (s_enc / s_dec)) in fp32; value = element * s_dec / s_enc; a zero s_dec gives zeros."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(4, 64, generator=g) * torch.logspace(-6, 0, 4)[:, None]).clamp(-1, 1).to(torch.bfloat16).double()
    x[3, :16] *= 1e-6  # blocks whose E4M3 scale underflows to 0 next to a large tensor max
    x[3, 20] = 1.0234375  # the tensor max: 2688 / 1.0234375 in fp32 is 2626.4426; a reciprocal times 2688, 2626.4429
    got = quantize(x, "nvfp4", axis=-1)
    amax_t = _f32(max(abs(v) for v in x.flatten().tolist()))
    s_enc = _f32(_f32(448.0 * 6.0) / amax_t)
    want = []
    for blk in x.reshape(-1, 16).tolist():
        s_dec = _brute(_f32(_f32(_f32(max(abs(v) for v in blk)) / _f32(6.0)) * s_enc), "e4m3")
        enc = _f32(s_enc / s_dec) if s_dec > 0 else 0.0
        want.append([_brute(_f32(_f32(v) * enc), "e2m1") * s_dec / s_enc for v in blk])
    want = torch.tensor(want, dtype=torch.float64).reshape(x.shape)
    assert torch.allclose(got, want, rtol=1e-15, atol=0)
    assert (got[3, :16] == 0).all() and x[3, :16].abs().max() > 0  # FA4's zero-scale block: its values are lost
    assert not torch.isnan(got).any()


def test_per_tensor_row_and_static_scales():
    x = torch.tensor([[0.5, -3.0, 1.0], [0.01, 0.02, -0.04]], dtype=torch.float64)
    pow2 = quantize(x, "e4m3:tensor:pow2")  # one power-of-two scale: 2^floor(log2(448 / 3)) = 128
    assert torch.equal(pow2, torch.tensor([[_brute(v * 128, "e4m3") / 128 for v in r] for r in x.tolist()]))
    row = quantize(x, "e4m3:row:fp32")  # per row, max / amax in fp32: each row's amax lands on 448
    for r, got in zip(x.tolist(), row.tolist()):
        s = _f32(448.0 / _f32(max(abs(v) for v in r)))
        assert got == [_brute(_f32(_f32(v) * s), "e4m3") / s for v in r]
    static = quantize(torch.tensor([0.5, 2.0], dtype=torch.float64), "e4m3:tensor:fp32@1")  # p <= 1 mapped to 448
    assert static.tolist() == [0.5, 1.0]  # 2.0 * 448 saturates at 448: a static scale clips what exceeds it


def test_format_text_round_trips_and_bad_text_is_refused():
    from harness.errors import ConfigError

    for text in ("mxfp8", "mxfp4", "nvfp4", "nvfp4@1", "e4m3:row:fp32", "e5m2:block64:fp32", "mxfp4:16"):
        assert parse_format(parse_format(text).describe()) == parse_format(text)
    for bad in ("fp4", "e4m3:block0", "mxfp4:row", "e4m3:tensor:nvfp4", "nvfp4:tensor"):
        with pytest.raises(ConfigError):
            parse_format(bad)


def test_the_envelope_covers_a_scale_that_flips_with_its_amax():
    """A block whose amax sits a hair below a power of two: shifted up by e, its E8M0 scale doubles and a small
    element rounds elsewhere; the envelope (the gate's bound for a kernel's own fp32 transform) must say so."""
    from harness.numerics._emulate import _envelope

    x = torch.zeros(1, 32, dtype=torch.float64)
    x[0, 0], x[0, 1] = 4.0 - 2.0**-20, 0.3  # scale 2^(1-2): 0.3 -> 0.5 x 0.5 = 0.25; at amax 4, 2^0: 0.3 -> 0.5
    fmt = parse_format("mxfp4")
    nominal = quantize(x, fmt, axis=-1)
    width = _envelope(x, torch.full_like(x, 2.0**-18), fmt, -1, nominal)
    assert nominal[0, 1] == 0.25 and width[0, 1] == 0.25
    # 0.625 at scale 0.5 is the tie 1.25 (-> 1.0, the even code): nudged up under the SAME scale it becomes 1.5,
    # while under the flipped scale (1) it stays 0.5: only the corner (value up, scale from the amax down) sees it
    x[0, 1] = 0.625
    nominal = quantize(x, fmt, axis=-1)
    assert nominal[0, 1] == 0.5 and _envelope(x, torch.full_like(x, 2.0**-18), fmt, -1, nominal)[0, 1] == 0.25
    assert _envelope(x, torch.full_like(x, 2.0**-30), fmt, -1, nominal)[0, 1] == 0  # far from the flip: none
