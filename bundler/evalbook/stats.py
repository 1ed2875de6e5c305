"""Statistics the audit re-derives (SPEC section 12): intervals and exact coverage.

- `wilson_interval`: the Wilson score interval without continuity correction, used for
  a pass rate with one repeat.
- `bootstrap_interval`: the percentile bootstrap `bootstrap-percentile/philox4x64-10/t7`,
  fully specified so that any implementation reproduces it bit for bit up to the
  order of the replicate sums: the Philox4x64-10 stream of `philox_stream`, index draws
  by rejection (`index_draws`), Hyndman-Fan type 7 percentiles.
- `exact_fraction` and `meets_min_coverage`: `min_coverage` compared as an exact
  rational built from the shortest decimal form of the number, never in floating point.

Everything here is pure computation on numbers; invalid arguments raise InputError,
among them values beyond the bounds that keep the work small (``MAX_RESAMPLES``,
``MAX_VALUES``, ``MAX_LEVEL``): the audit checks the same bounds first
(``derive.bound_violations``), so these are a second line, never reached from a bundle.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from bundler.core.errors import InputError

BOOTSTRAP_METHOD = "bootstrap-percentile/philox4x64-10/t7"
DEFAULT_RESAMPLES = 2000
# The most resamples a bootstrap is re-derived with (docs/format.md, Audit): what
# common tools use at most (scipy.stats.bootstrap 9,999 by default, R's boot and most
# guidance 10,000). With n at most 20,000 executed examples (SPEC 4.3) this caps the
# index draws of a bundle at 2 x 10^8, a few seconds of numpy.
MAX_RESAMPLES = 10_000
# The largest level whose upper tail 1 - (1 - level) / 2 is still below 1 in double
# precision (above it the normal quantile is infinite): 1 - 2^-52.
MAX_LEVEL = 1.0 - 2.0**-52
# At most one value per executed example, and a bundle holds at most 20,000 cases.
MAX_VALUES = 20_000

_WORD = 1 << 64
_MAX_SEED = 1 << 128
# Index draws generated per block: bounds memory (8 bytes a draw, a few arrays of
# this size alive at once) while keeping numpy's per-call overhead negligible.
_BLOCK_DRAWS = 1 << 20


class BootstrapStatistic(enum.Enum):
    """The check statistics a bootstrap interval is computed for (SPEC section 12)."""

    PASS_RATE = "pass_rate"
    MEAN = "mean"


def _require_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(f"{name}: must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise InputError(f"{name}: must be >= {minimum}, got {number}")
    return number


def _require_level(level: object) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float):
        raise InputError(f"level: must be a number strictly between 0 and 1, got {level!r}")
    value = float(level)
    if not 0.0 < value < 1.0:
        raise InputError(f"level: must be strictly between 0 and 1, got {level!r}")
    if value > MAX_LEVEL:
        raise InputError(f"level: must be at most 1 - 2^-52, got {level!r}")
    return value


def wilson_interval(passes: int, n: int, level: float) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for ``passes`` of ``n``.

    z is the standard normal quantile at 1 - (1 - level) / 2. The lower bound is exactly
    0.0 when ``passes`` is 0 and the upper bound exactly 1.0 when ``passes`` is ``n``;
    both bounds lie in [0, 1].

    Raises InputError unless 1 <= n, 0 <= passes <= n and 0 < level < 1.
    """
    n = _require_int(n, "n", 1)
    passes = _require_int(passes, "passes", 0)
    if passes > n:
        raise InputError(f"passes: must be at most n = {n}, got {passes}")
    z = NormalDist().inv_cdf(1.0 - (1.0 - _require_level(level)) / 2.0)
    p = passes / n
    z2_over_n = z * z / n
    denominator = 1.0 + z2_over_n
    centre = (p + z2_over_n / 2.0) / denominator
    half_width = z * math.sqrt(p * (1.0 - p) / n + z2_over_n / (4.0 * n)) / denominator
    low = 0.0 if passes == 0 else max(0.0, centre - half_width)
    high = 1.0 if passes == n else min(1.0, centre + half_width)
    return low, high


def philox_stream(seed: int) -> np.random.Philox:
    """The Philox4x64-10 bit generator of the bootstrap, positioned at its first word.

    Key (seed mod 2^64, seed div 2^64), counters (1,0,0,0), (2,0,0,0), ..., the four
    64-bit words of each block in order: exactly ``numpy.random.Philox(key=seed)``,
    whose ``random_raw`` yields that stream.

    Raises InputError unless 0 <= seed < 2^128.
    """
    seed = _require_int(seed, "seed", 0)
    if seed >= _MAX_SEED:
        raise InputError(f"seed: must be below 2^128, got {seed}")
    return np.random.Philox(key=seed)


class IndexDraws:
    """Index draws over ``n``, taken in order from the Philox stream of ``seed``.

    A word x is rejected while x < (2^64 - n) mod n and otherwise gives x mod n. Words
    are produced in blocks and filtered; rejection only drops words, so the accepted
    words, kept in order with any surplus carried to the next request, are the
    sequential stream's.
    """

    def __init__(self, seed: int, n: int) -> None:
        """Raise InputError unless 0 <= seed < 2^128 and 1 <= n < 2^64."""
        n = _require_int(n, "n", 1)
        if n >= _WORD:
            raise InputError(f"n: must be below 2^64, got {n}")
        self._bitgen = philox_stream(seed)
        # The threshold is computed with Python integers: 2^64 - n does not fit the
        # unsigned 64-bit arithmetic that numpy would use.
        self._threshold = np.uint64((_WORD - n) % n)
        self._modulus = np.uint64(n)
        self._surplus: NDArray[np.uint64] = np.empty(0, dtype=np.uint64)

    def take(self, count: int) -> NDArray[np.uint64]:
        """The next ``count`` draws, each in 0..n-1, continuing the previous call's."""
        count = _require_int(count, "count", 0)
        chunks = [self._surplus]
        have = int(self._surplus.size)
        while have < count:
            raw: NDArray[np.uint64] = self._bitgen.random_raw(count - have)
            if self._threshold:
                raw = raw[raw >= self._threshold]
            chunks.append(raw)
            have += int(raw.size)
        words = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
        self._surplus = words[count:]
        result: NDArray[np.uint64] = words[:count] % self._modulus
        return result


def index_draws(seed: int, n: int, count: int) -> NDArray[np.uint64]:
    """The first ``count`` index draws over ``n`` of the bootstrap stream for ``seed``.

    Raises InputError unless 0 <= seed < 2^128, 1 <= n < 2^64 and count >= 0.
    """
    return IndexDraws(seed, n).take(count)


def bootstrap_interval(
    values: Sequence[float] | Sequence[int] | NDArray[np.generic],
    *,
    statistic: BootstrapStatistic | Literal["pass_rate", "mean"],
    seed: int,
    level: float,
    resamples: int = DEFAULT_RESAMPLES,
    repeats: int = 1,
) -> tuple[float, float]:
    """Percentile bootstrap `bootstrap-percentile/philox4x64-10/t7` over examples.

    ``values`` holds one entry per executed example, in example_id order:
    - ``pass_rate``: the example's number of passing repeats (an integer in
      0..``repeats``); a replicate's statistic is its summed pass count divided by
      n x ``repeats``, which is the check's passes / (executed x repeats).
    - ``mean``: the mean of the example's repeat scores; a replicate's statistic is the
      mean of its n entries (``repeats`` is not used).
    Resample b (0..resamples-1) takes the next n index draws of `index_draws`. The
    interval is numpy's default (Hyndman-Fan type 7) quantile of the replicate
    statistics at (1 - level) / 2 and 1 - (1 - level) / 2.

    Raises InputError for an empty or non one-dimensional ``values``, non-finite values,
    pass counts outside 0..repeats, an unknown statistic, or invalid seed, level,
    resamples or repeats.
    """
    try:
        kind = BootstrapStatistic(
            statistic.value if isinstance(statistic, BootstrapStatistic) else statistic
        )
    except ValueError as exc:
        raise InputError(f"statistic: unknown bootstrap statistic {statistic!r}") from exc
    level = _require_level(level)
    resamples = _require_int(resamples, "resamples", 1)
    if resamples > MAX_RESAMPLES:
        raise InputError(f"resamples: must be at most {MAX_RESAMPLES}, got {resamples}")
    repeats = _require_int(repeats, "repeats", 1)
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise InputError("values: must be a non-empty one-dimensional sequence")
    n = int(array.size)
    if n > MAX_VALUES:
        raise InputError(f"values: at most {MAX_VALUES} examples, got {n}")
    sample: NDArray[np.int64] | NDArray[np.float64]
    if kind is BootstrapStatistic.PASS_RATE:
        if array.dtype.kind not in "iu" and not (
            array.dtype.kind == "f" and np.all(np.isfinite(array) & (array == np.round(array)))
        ):
            raise InputError("values: pass counts must be integers")
        sample = array.astype(np.int64)
        if int(sample.min()) < 0 or int(sample.max()) > repeats:
            raise InputError(f"values: pass counts must lie in 0..{repeats}")
        # Integer sums are exact; the one division rounds like passes / (n x repeats).
        denominator = float(n * repeats)
    elif kind is BootstrapStatistic.MEAN:
        if array.dtype.kind not in "iuf":
            raise InputError("values: example means must be numbers")
        sample = array.astype(np.float64)
        if not np.all(np.isfinite(sample)):
            raise InputError("values: example means must be finite")
        denominator = float(n)
    draws = IndexDraws(seed, n)
    replicates = np.empty(resamples, dtype=np.float64)
    per_block = max(1, _BLOCK_DRAWS // n)
    for start in range(0, resamples, per_block):
        block = min(per_block, resamples - start)
        indices = draws.take(block * n).astype(np.intp).reshape(block, n)
        replicates[start : start + block] = sample[indices].sum(axis=1) / denominator
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return float(low), float(high)


def exact_fraction(x: float) -> Fraction:
    """The exact rational of ``x``'s shortest decimal form (0.28 -> 7/25, not the binary).

    Raises InputError for booleans, non-numbers and non-finite floats.
    """
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise InputError(f"number: expected an int or float, got {x!r}")
    if isinstance(x, int):
        return Fraction(x)
    if not math.isfinite(x):
        raise InputError(f"number: must be finite, got {x!r}")
    return Fraction(repr(x))


def meets_min_coverage(executed: int, expected: int, min_coverage: float) -> bool:
    """True when executed >= min_coverage x expected, in exact rationals.

    ``min_coverage`` is read from its shortest decimal form (`exact_fraction`), so 7 of
    25 meets 0.28. With ``expected`` 0 the requirement is vacuously met.

    Raises InputError unless 0 <= executed <= expected and 0 <= min_coverage <= 1.
    """
    executed = _require_int(executed, "executed", 0)
    expected = _require_int(expected, "expected", 0)
    if executed > expected:
        raise InputError(f"executed: {executed} exceeds expected {expected}")
    required = exact_fraction(min_coverage)
    if not 0 <= required <= 1:
        raise InputError(f"min_coverage: must lie in 0..1, got {min_coverage!r}")
    return executed >= required * expected
