"""A pipeline's `schedule`: a 5-field cron string, read here as Vixie cron reads it; croniter finds the runs.

The scheduler itself is the system's (cron, a systemd timer, a Kubernetes CronJob; see
pipelines/deploy/); bookft only checks that the string means what cron would read and shows the
next run in `bookft pipeline list`. Accepted: the subset every scheduler agrees on (`*`, values,
`a-b`, `/step`, lists, month and weekday names, 7 = Sunday, @yearly ... @hourly), with Vixie's
day rule: when neither day-of-month nor day-of-week starts with `*`, a day matches if EITHER does.
Refused with a ConfigError naming the field: anything else (croniter's L, W, #, ?, H, 6-7
fields), reversed ranges, zero steps, @reboot, and schedules that can never fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from croniter import CroniterBadDateError, croniter

from bookft.errors import ConfigError

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
# (name, lo, hi, names)
FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day-of-month", 1, 31, {}),
          ("month", 1, 12, MONTHS), ("day-of-week", 0, 7, DAYS))
FULL = (*(frozenset(range(lo, hi + 1)) for _, lo, hi, _ in FIELDS[:4]), frozenset(range(7)))  # 7 folded into 0


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 folded into 0)
    day_or: bool  # neither day field starts with `*`: a day matches if either matches

    def next_run(self, after: datetime) -> datetime | None:
        """The first matching minute strictly after `after` (naive or aware; same tzinfo kept), or None
        if croniter finds none within 50 years (only schedules that never fire, which parse_cron refuses)."""
        sets = [self.minutes, self.hours, self.days, self.months, self.weekdays]
        if self.day_or and (self.days == FULL[2] or self.weekdays == FULL[4]):
            sets[2], sets[4] = FULL[2], FULL[4]  # either day matches, one always does; croniter would AND
        text = " ".join("*" if s == f else ",".join(map(str, sorted(s))) for s, f in zip(sets, FULL, strict=True))
        try:
            return croniter(text, after, ret_type=datetime, day_or=self.day_or).get_next()
        except CroniterBadDateError:
            return None


# Parsing stays here, croniter only iterates the expanded sets: croniter accepts more than every
# scheduler reads (L, W, #, ?, H, 6-7 fields), its messages name neither field nor value, and
# croniter 7.0 misreads some plain Vixie fields: `12-12/2` as every 2 hours, `jul-7` as every
# month, a reversed range `5-1` wrapped round.
def _value(tok: str, name: str, lo: int, hi: int, names: dict[str, int], expr: str) -> int:
    low = tok.lower()
    if low in names:
        return names[low]
    if not tok.isdigit():
        known = f" or a name ({', '.join(names)})" if names else ""
        raise ConfigError(f"schedule {expr!r}: {name}: {tok!r} is not a number{known}")
    v = int(tok)
    if not lo <= v <= hi:
        raise ConfigError(f"schedule {expr!r}: {name}: {v} is out of range {lo}-{hi}")
    return v


def _field(text: str, name: str, lo: int, hi: int, names: dict[str, int], expr: str) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise ConfigError(f"schedule {expr!r}: {name}: empty list item in {text!r}")
        base, slash, step_s = item.partition("/")
        step = 1
        if slash:
            if not step_s.isdigit() or int(step_s) == 0:
                raise ConfigError(f"schedule {expr!r}: {name}: step {step_s!r} must be a positive integer")
            step = int(step_s)
        if base == "*":
            a, b = lo, hi
        elif "-" in base:
            a_s, _, b_s = base.partition("-")
            a = _value(a_s, name, lo, hi, names, expr)
            b = _value(b_s, name, lo, hi, names, expr)
            if a > b:
                raise ConfigError(f"schedule {expr!r}: {name}: range {base!r} runs backwards")
        else:
            a = _value(base, name, lo, hi, names, expr)
            b = hi if slash else a
        out.update(range(a, b + 1, step))
    return out


def parse_cron(expr: str) -> CronSchedule:
    """Parse and validate a 5-field cron expression or macro; raise ConfigError saying what is wrong."""
    if not isinstance(expr, str) or not expr.strip():
        raise ConfigError("schedule: empty; write 5 cron fields, e.g. '17 3 * * *' (03:17 every day)")
    text = expr.strip()
    if text.startswith("@"):
        if text.lower() == "@reboot":
            raise ConfigError(f"schedule {expr!r}: @reboot is not a refresh schedule; use e.g. @daily")
        if text.lower() not in MACROS:
            raise ConfigError(f"schedule {expr!r}: unknown macro (known: {', '.join(MACROS)})")
        text = MACROS[text.lower()]
    parts = text.split()
    if len(parts) != 5:
        raise ConfigError(f"schedule {expr!r}: expected 5 fields (minute hour day-of-month month "
                          f"day-of-week), got {len(parts)}; e.g. '17 3 * * *'")
    sets = [_field(p, *spec, expr=expr) for p, spec in zip(parts, FIELDS, strict=True)]
    sched = CronSchedule(expr, *map(frozenset, sets[:4]), frozenset(d % 7 for d in sets[4]),
                         day_or=not (parts[2].startswith("*") or parts[4].startswith("*")))
    if sched.next_run(datetime(2026, 1, 1)) is None:
        raise ConfigError(f"schedule {expr!r}: never fires (no such day, e.g. 30 February)")
    return sched
