"""Archive fixity at scale (SPEC section 13): check, on a schedule, that every stored
bundle still holds its bytes and verifies, and keep the ledger and the record of it.

``select`` chooses the bundles, ``check.check_batch`` checks a batch of them (the one
task function, run in this process, in local processes or on a Dask cluster),
``ledger`` keeps what was seen and every check, ``record`` writes the run's evidence,
and ``run.run_fixity`` ties them together.
"""

from bundler.fixity.run import FixityConfig, Summary, run_fixity
from bundler.fixity.select import Selection, parse_duration, parse_sample

__all__ = ["FixityConfig", "Selection", "Summary", "parse_duration", "parse_sample", "run_fixity"]
