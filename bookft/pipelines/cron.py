"""A small 5-field cron expression parser: validates a pipeline's `schedule` and computes its next run.

The scheduler itself is the system's (cron, a systemd timer, a Kubernetes CronJob; see
pipelines/deploy/); bookft only checks that the string means what cron would read and shows the
next run in `bookft pipeline list`.

Grammar (Vixie cron / POSIX, the subset every scheduler agrees on):
    MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK
    field   = item ("," item)*                       lists
    item    = ("*" | value | value "-" value) ["/" step]
    minute 0-59, hour 0-23, day of month 1-31, month 1-12 or jan..dec,
    day of week 0-7 (0 and 7 = Sunday) or sun..sat; names are case-insensitive.
    `a/n` means a, a+n, ... up to the field's maximum (as Vixie cron).
    Macros: @yearly (= @annually), @monthly, @weekly, @daily (= @midnight), @hourly.
    When both day-of-month and day-of-week are restricted (neither starts with `*`), a day matches
    if EITHER matches (the classic cron rule); otherwise both must.
Rejected with a ConfigError naming the field: wrong field count, values out of range, reversed
ranges, zero steps, unknown names, @reboot (meaningless for a refresh), and schedules that can
never fire (e.g. `0 0 30 2 *`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bookft.errors import ConfigError

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
# (name, lo, hi, names)
FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day-of-month", 1, 31, {}),
          ("month", 1, 12, MONTHS), ("day-of-week", 0, 7, DAYS))


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 folded into 0)
    day_restricted: bool
    weekday_restricted: bool

    def matches_day(self, d: datetime) -> bool:
        if d.month not in self.months:
            return False
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.day_restricted and self.weekday_restricted:
            return dom or dow
        return dom and dow

    def next_run(self, after: datetime) -> datetime | None:
        """The first matching minute strictly after `after` (naive or aware; same tzinfo kept), or None
        if there is none within 5 years (which only happens for schedules that never fire)."""
        t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = t.replace(hour=0, minute=0)
        for _ in range(366 * 5 + 2):
            if self.matches_day(day):
                for h in sorted(self.hours):
                    for m in sorted(self.minutes):
                        cand = day.replace(hour=h, minute=m)
                        if cand >= t:
                            return cand
            day = (day + timedelta(days=1)).replace(hour=0, minute=0)
        return None


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
    weekdays = frozenset(d % 7 for d in sets[4])
    sched = CronSchedule(expr, frozenset(sets[0]), frozenset(sets[1]), frozenset(sets[2]), frozenset(sets[3]),
                         weekdays, not parts[2].startswith("*"), not parts[4].startswith("*"))
    if sched.next_run(datetime(2026, 1, 1)) is None:
        raise ConfigError(f"schedule {expr!r}: never fires (no such day, e.g. 30 February)")
    return sched
