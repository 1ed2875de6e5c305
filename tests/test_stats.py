"""Tests of bundler.evalbook.stats against SPEC section 12's references and independent models.

The independent models here are written from the definitions, not from the code under
test: a plain-integer Philox4x64-10 (Random123's round function, multipliers and Weyl
key schedule), a sequential rejection sampler, a hand-written type 7 percentile, and
the Wilson interval of statsmodels.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from bundler.core.errors import InputError
from bundler.evalbook import stats
from bundler.evalbook.stats import (
    BootstrapStatistic,
    IndexDraws,
    bootstrap_interval,
    exact_fraction,
    index_draws,
    meets_min_coverage,
    philox_stream,
    wilson_interval,
)

MASK64 = (1 << 64) - 1
# Philox4x64 multipliers and Weyl key increments (golden ratio, sqrt(3) - 1), Random123.
PHILOX_M0 = 0xD2E7470EE14C6C93
PHILOX_M1 = 0xCA5A826395121157
PHILOX_W0 = 0x9E3779B97F4A7C15
PHILOX_W1 = 0xBB67AE8584CAA73B


def philox4x64_10(
    counter: tuple[int, int, int, int], key: tuple[int, int]
) -> tuple[int, int, int, int]:
    """One Philox4x64 block with 10 rounds, from the Random123 definition."""
    x0, x1, x2, x3 = counter
    k0, k1 = key
    for round_index in range(10):
        if round_index:
            k0 = (k0 + PHILOX_W0) & MASK64
            k1 = (k1 + PHILOX_W1) & MASK64
        product0 = PHILOX_M0 * x0
        product1 = PHILOX_M1 * x2
        x0, x1, x2, x3 = (
            (product1 >> 64) ^ x1 ^ k0,
            product1 & MASK64,
            (product0 >> 64) ^ x3 ^ k1,
            product0 & MASK64,
        )
    return x0, x1, x2, x3


def reference_words(seed: int, count: int) -> list[int]:
    """The SPEC's stream: key (seed mod 2^64, seed div 2^64), counters 1, 2, 3, ..."""
    key = (seed & MASK64, seed >> 64)
    words: list[int] = []
    block = 1
    while len(words) < count:
        words.extend(philox4x64_10((block, 0, 0, 0), key))
        block += 1
    return words[:count]


def reference_draws(seed: int, n: int, count: int) -> list[int]:
    """Sequential rejection sampling exactly as SPEC section 12 words it."""
    threshold = ((1 << 64) - n) % n
    draws: list[int] = []
    block = 1
    key = (seed & MASK64, seed >> 64)
    while len(draws) < count:
        for word in philox4x64_10((block, 0, 0, 0), key):
            if word >= threshold and len(draws) < count:
                draws.append(word % n)
        block += 1
    return draws


def type7(sorted_values: list[float], p: float) -> float:
    """Hyndman-Fan type 7 percentile of an ascending list."""
    h = (len(sorted_values) - 1) * p
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


def reference_bootstrap(
    values: list[float], denominator: float, seed: int, resamples: int, level: float
) -> tuple[float, float]:
    """Slow, sequential bootstrap percentile interval from the SPEC's words."""
    n = len(values)
    draws = reference_draws(seed, n, n * resamples)
    replicates = []
    for b in range(resamples):
        total = 0.0
        for index in draws[b * n : (b + 1) * n]:
            total += values[index]
        replicates.append(total / denominator)
    replicates.sort()
    tail = (1 - level) / 2
    return type7(replicates, tail), type7(replicates, 1 - tail)


# --- Philox4x64-10 and numpy's stream -------------------------------------------------


def test_reference_philox_matches_random123_known_answer() -> None:
    assert philox4x64_10((0, 0, 0, 0), (0, 0)) == (
        0x16554D9ECA36314C,
        0xDB20FE9D672D0FDC,
        0xD7E772CEE186176B,
        0x7E68B68AEC7BA23B,
    )


def test_numpy_stream_for_seed_42_starts_as_spec_says() -> None:
    words = philox_stream(42).random_raw(3)
    assert [int(w) for w in words] == [
        15129985323320379406,
        3490965594592278910,
        16005516994917231875,
    ]


@pytest.mark.parametrize(
    "seed",
    [0, 42, 7, (1 << 64) - 1, 1 << 64, 3 * (1 << 64) + 5, (1 << 128) - 1],
)
def test_numpy_stream_is_philox_with_counters_from_one(seed: int) -> None:
    # 14 words span four blocks, so the counter sequence 1, 2, 3, 4 is exercised and
    # seeds of 2^64 and above check the key's high word.
    words = [int(w) for w in philox_stream(seed).random_raw(14)]
    assert words == reference_words(seed, 14)


def test_numpy_counter_carries_into_the_second_word() -> None:
    generator = philox_stream(9)
    state = generator.state
    state["state"]["counter"] = np.array([MASK64, 0, 0, 0], dtype=np.uint64)
    state["buffer_pos"] = 4
    generator.state = state
    words = [int(w) for w in generator.random_raw(4)]
    assert list(words) == list(philox4x64_10((0, 1, 0, 0), (9, 0)))


@pytest.mark.parametrize("seed", [-1, 1 << 128, True, 1.5])
def test_seed_out_of_range_is_rejected(seed: object) -> None:
    with pytest.raises(InputError, match="seed"):
        philox_stream(seed)  # type: ignore[arg-type]


# --- index draws ----------------------------------------------------------------------


def test_draws_for_seed_7_over_5_start_as_spec_says() -> None:
    expected = [2, 0, 0, 2, 0, 4, 3, 2, 0, 4, 2, 1, 0, 0, 3]
    assert [int(d) for d in index_draws(7, 5, 15)] == expected
    assert reference_draws(7, 5, 15) == expected


@pytest.mark.parametrize(
    "n",
    [
        1,
        3,
        5000,
        1 << 40,
        # (2^64 - n) mod n is about 2^62 here: a quarter of the words are rejected,
        # which exercises the rejection and the refill of the vectorised path.
        (1 << 63) + (1 << 62) + 12345,
        (1 << 63) + 1,
        (1 << 64) - 1,
    ],
)
def test_vectorised_draws_equal_sequential_rejection(n: int) -> None:
    expected = reference_draws(11, n, 300)
    assert [int(d) for d in index_draws(11, n, 300)] == expected
    # Pieces of odd sizes carry rejected and surplus words across calls.
    draws = IndexDraws(11, n)
    pieces: list[int] = []
    for size in (1, 7, 0, 50, 3, 239):
        pieces.extend(int(d) for d in draws.take(size))
    assert pieces == expected


def test_rejection_threshold_actually_rejects_for_large_n() -> None:
    n = (1 << 63) + (1 << 62) + 12345
    threshold = ((1 << 64) - n) % n
    words = reference_words(11, 300)
    rejected = sum(1 for w in words if w < threshold)
    assert rejected > 30
    # Plain `x mod n` without rejection would give a different sequence.
    assert [w % n for w in words[:300]] != reference_draws(11, n, 300)


@pytest.mark.parametrize("n", [0, -3, 1 << 64])
def test_index_draws_reject_bad_n(n: int) -> None:
    with pytest.raises(InputError, match="n:"):
        index_draws(1, n, 5)


# --- bootstrap ------------------------------------------------------------------------


def test_bootstrap_pass_rate_reference() -> None:
    low, high = bootstrap_interval(
        [3, 2, 3, 0, 1], statistic="pass_rate", seed=42, level=0.95, repeats=3
    )
    assert low == pytest.approx(0.26666666666666666, abs=1e-12)
    assert high == pytest.approx(0.9333333333333333, abs=1e-12)


@pytest.mark.parametrize(
    ("level", "expected"),
    [(0.95, (0.3, 0.78)), (0.99, (0.22995000000000007, 0.8101499999999964))],
)
def test_bootstrap_mean_reference(level: float, expected: tuple[float, float]) -> None:
    low, high = bootstrap_interval(
        [0.9, 0.4, 0.75, 0.1, 0.6], statistic=BootstrapStatistic.MEAN, seed=42, level=level
    )
    assert low == pytest.approx(expected[0], abs=1e-12)
    assert high == pytest.approx(expected[1], abs=1e-12)


def test_spec_references_also_follow_from_the_sequential_model() -> None:
    low, high = reference_bootstrap([3, 2, 3, 0, 1], 15.0, 42, 2000, 0.95)
    assert (low, high) == pytest.approx((0.26666666666666666, 0.9333333333333333), abs=1e-12)
    low, high = reference_bootstrap([0.9, 0.4, 0.75, 0.1, 0.6], 5.0, 42, 2000, 0.99)
    assert (low, high) == pytest.approx((0.22995000000000007, 0.8101499999999964), abs=1e-12)


@pytest.mark.parametrize("statistic", ["pass_rate", "mean"])
def test_bootstrap_equals_sequential_model_across_blocks(
    statistic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tiny block size forces many blocks, each ending mid-resample of the stream.
    monkeypatch.setattr(stats, "_BLOCK_DRAWS", 10)
    if statistic == "pass_rate":
        values: list[float] = [2, 0, 1, 2, 2, 1, 0]
        denominator = 7 * 2.0
    else:
        values = [0.125, 0.5, 0.3, 0.9, 0.0, 1.0, 0.45]
        denominator = 7.0
    got = bootstrap_interval(
        values,
        statistic=BootstrapStatistic(statistic),
        seed=123456789,
        level=0.9,
        resamples=301,
        repeats=2,
    )
    assert got == pytest.approx(
        reference_bootstrap(values, denominator, 123456789, 301, 0.9), abs=1e-12
    )


def test_bootstrap_is_deterministic_and_depends_on_order_and_seed() -> None:
    values = [0.1, 0.9, 0.5, 0.7, 0.2, 0.3]
    first = bootstrap_interval(values, statistic="mean", seed=5, level=0.9, resamples=200)
    assert bootstrap_interval(values, statistic="mean", seed=5, level=0.9, resamples=200) == first
    assert bootstrap_interval(values, statistic="mean", seed=6, level=0.9, resamples=200) != first
    assert (
        bootstrap_interval(values[::-1], statistic="mean", seed=5, level=0.9, resamples=200)
        != first
    )


def test_bootstrap_of_constant_values_is_degenerate() -> None:
    assert bootstrap_interval(
        [2, 2, 2, 2], statistic="pass_rate", seed=1, level=0.95, repeats=2
    ) == (1.0, 1.0)


def test_bootstrap_speed_5000_examples_2000_resamples() -> None:
    values = np.random.default_rng(3).random(5000)
    started = time.perf_counter()
    low, high = bootstrap_interval(values, statistic="mean", seed=42, level=0.95)
    elapsed = time.perf_counter() - started
    assert 0.0 < low < high < 1.0
    # Measured at about 0.2 s; the bound leaves room for a loaded shared machine.
    assert elapsed < 2.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": [], "statistic": "mean"}, "non-empty"),
        ({"values": [[0.1]], "statistic": "mean"}, "one-dimensional"),
        ({"values": [0.1, float("nan")], "statistic": "mean"}, "finite"),
        ({"values": [1, 4], "statistic": "pass_rate"}, "0..3"),
        ({"values": [1, -1], "statistic": "pass_rate"}, "0..3"),
        ({"values": [1.5], "statistic": "pass_rate"}, "integers"),
        ({"values": [1], "statistic": "median"}, "statistic"),
        ({"values": [1], "statistic": "mean", "level": 1.0}, "level"),
        ({"values": [1], "statistic": "mean", "resamples": 0}, "resamples"),
        ({"values": [1], "statistic": "pass_rate", "repeats": 0}, "repeats"),
        ({"values": [1], "statistic": "mean", "seed": -4}, "seed"),
    ],
)
def test_bootstrap_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    arguments: dict[str, object] = {"seed": 1, "level": 0.95, "repeats": 3}
    arguments.update(kwargs)
    values = arguments.pop("values")
    with pytest.raises(InputError, match=match):
        bootstrap_interval(values, **arguments)  # type: ignore[arg-type]


# --- Wilson ---------------------------------------------------------------------------


def test_wilson_z_at_95_percent() -> None:
    assert NormalDist().inv_cdf(1 - 0.05 / 2) == pytest.approx(1.959963984540054, abs=1e-14)


@pytest.mark.parametrize(
    ("passes", "n", "expected"),
    [
        (3, 10, (0.10779126740630104, 0.6032218525388546)),
        (81, 100, (0.7222115462093562, 0.8748524849023126)),
    ],
)
def test_wilson_spec_references(passes: int, n: int, expected: tuple[float, float]) -> None:
    low, high = wilson_interval(passes, n, 0.95)
    assert abs(low - expected[0]) <= 1e-12
    assert abs(high - expected[1]) <= 1e-12


def test_wilson_spec_references_at_the_edges() -> None:
    z = 1.959963984540054
    # With p = 0 the Wilson bounds are 0 and z^2 / (n + z^2); mirrored for p = 1.
    low, high = wilson_interval(0, 10, 0.95)
    assert low == 0.0
    assert abs(high - z * z / (10 + z * z)) <= 1e-12
    assert abs(high - 0.2775327999) <= 1e-10
    low, high = wilson_interval(10, 10, 0.95)
    assert high == 1.0
    assert abs(low - 10 / (10 + z * z)) <= 1e-12
    assert abs(low - 0.7224672001) <= 1e-10


def _grid() -> list[tuple[int, int]]:
    rng = np.random.default_rng(20260925)
    cells: list[tuple[int, int]] = []
    for n in (1, 2, 3, 5, 10, 17, 50, 100):
        cells.extend((k, n) for k in range(n + 1))
    for n in (999, 1000, 4321, 20_000):
        ks = {0, 1, 2, n // 3, n // 2, n - 2, n - 1, n}
        ks.update(int(k) for k in rng.integers(0, n + 1, size=12))
        cells.extend((k, n) for k in sorted(ks))
    return cells


@pytest.mark.parametrize("level", [0.90, 0.95, 0.99])
def test_wilson_matches_statsmodels_on_a_grid(level: float) -> None:
    for passes, n in _grid():
        expected_low, expected_high = proportion_confint(
            passes, n, alpha=1 - level, method="wilson"
        )
        low, high = wilson_interval(passes, n, level)
        assert abs(low - expected_low) <= 1e-12, (passes, n, level)
        assert abs(high - expected_high) <= 1e-12, (passes, n, level)
        assert 0.0 <= low <= passes / n <= high <= 1.0


@pytest.mark.parametrize(
    ("passes", "n", "level", "match"),
    [
        (1, 0, 0.95, "n:"),
        (4, 3, 0.95, "passes"),
        (-1, 3, 0.95, "passes"),
        (1, 3, 0.0, "level"),
        (1, 3, 1.0, "level"),
        (1, 3, float("nan"), "level"),
        (True, 3, 0.95, "passes"),
    ],
)
def test_wilson_rejects_bad_arguments(passes: int, n: int, level: float, match: str) -> None:
    with pytest.raises(InputError, match=match):
        wilson_interval(passes, n, level)


# --- exact rationals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (0.28, Fraction(7, 25)),
        (0.1, Fraction(1, 10)),
        (1e-7, Fraction(1, 10_000_000)),
        (0.0, Fraction(0)),
        (1, Fraction(1)),
        (0.3333333333333333, Fraction(3333333333333333, 10**16)),
    ],
)
def test_exact_fraction_reads_the_shortest_decimal(number: float, expected: Fraction) -> None:
    assert exact_fraction(number) == expected
    assert exact_fraction(0.28) != Fraction(0.28)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), True, "0.5"])
def test_exact_fraction_rejects_non_numbers(number: object) -> None:
    with pytest.raises(InputError):
        exact_fraction(number)  # type: ignore[arg-type]


def test_min_coverage_is_exact_where_floating_point_is_not() -> None:
    assert meets_min_coverage(7, 25, 0.28)
    assert not meets_min_coverage(6, 25, 0.28)
    # The floating-point reading of the same rule gets 7 of 25 wrong.
    assert 0.28 * 25 == 7.000000000000001
    assert not 7 >= 0.28 * 25
    # Dividing instead also decides wrongly: this count is just below 28%, yet its
    # quotient rounds to the same double as 0.28.
    executed, expected = 28 * 10**18 - 1, 10**20
    assert executed / expected >= 0.28
    assert not meets_min_coverage(executed, expected, 0.28)


def test_min_coverage_edges() -> None:
    assert meets_min_coverage(0, 0, 1.0)
    assert meets_min_coverage(0, 10, 0)
    assert meets_min_coverage(10, 10, 1)
    assert not meets_min_coverage(9, 10, 1.0)


@pytest.mark.parametrize(
    ("executed", "expected", "min_coverage", "match"),
    [(3, 2, 0.5, "exceeds"), (-1, 2, 0.5, "executed"), (1, 2, 1.5, "0..1"), (1, 2, -0.1, "0..1")],
)
def test_min_coverage_rejects_bad_arguments(
    executed: int, expected: int, min_coverage: float, match: str
) -> None:
    with pytest.raises(InputError, match=match):
        meets_min_coverage(executed, expected, min_coverage)


@given(
    expected=st.integers(min_value=0, max_value=10_000),
    fraction=st.floats(min_value=0, max_value=1),
    hundredths=st.integers(min_value=0, max_value=100),
)
def test_min_coverage_agrees_with_integer_arithmetic(
    expected: int, fraction: float, hundredths: int
) -> None:
    executed = math.floor(expected * fraction)
    min_coverage = hundredths / 100
    assert meets_min_coverage(executed, expected, min_coverage) == (
        executed * 100 >= hundredths * expected
    )
