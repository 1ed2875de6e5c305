"""The times of an allowed_signers line (``valid-after``, ``valid-before``), read as
ssh-keygen reads them; used by ``trust.sshsig``."""

from __future__ import annotations

import calendar
import time

from bundler.core.errors import InputError


def parse_time(value: str, where: str, option: str) -> int:
    """ssh-keygen's absolute times (``parse_absolute_time``): YYYYMMDD[HHMM[SS]], UTC when
    it ends in Z or UTC in any case, else local time; each field in the range of glibc's
    strptime (day 1-31 whatever the month, second 0-61) and the moment normalised as
    timegm/mktime do (20200230 is 1 March); ASCII digits only; the epoch itself and
    earlier refused. js/src/sshsig.mjs reads every spelling the same."""
    utc = False
    digits = value
    if len(value) > 1 and value[-1:].upper() == "Z":
        utc, digits = True, value[:-1]
    elif len(value) > 3 and value[-3:].upper() == "UTC":
        utc, digits = True, value[:-3]
    if not digits.isascii() or not digits.isdigit() or len(digits) not in (8, 12, 14):
        raise InputError(f'{where}: {option}="{value}" is not YYYYMMDD[HHMM[SS]][Z]')
    year, month, day = int(digits[:4]), int(digits[4:6]), int(digits[6:8])
    hour, minute, second = (int(digits[i : i + 2] or "0") for i in (8, 10, 12))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 61):
        raise InputError(f'{where}: {option}="{value}" is not a valid time')
    fields = (year, month, day, hour, minute, second, 0, 0, -1)
    try:
        seconds = calendar.timegm(fields) if utc else int(time.mktime(fields))
    except (OverflowError, ValueError) as exc:
        raise InputError(f'{where}: {option}="{value}" is not a valid time') from exc
    if seconds <= 0:
        raise InputError(f'{where}: {option}="{value}" is not after 1970-01-01T00:00:00Z')
    return seconds
