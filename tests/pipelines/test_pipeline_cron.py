"""The 5-field cron parser: ranges, steps, lists, names, macros, next run, and clear errors."""

from datetime import datetime

import pytest

from bookft.errors import ConfigError
from bookft.pipelines.cron import parse_cron


def test_fields_ranges_steps_lists_names():
    s = parse_cron("*/15 1-3,22 * jan-mar,DEC mon-fri")
    assert s.minutes == {0, 15, 30, 45}
    assert s.hours == {1, 2, 3, 22}
    assert s.months == {1, 2, 3, 12}
    assert s.weekdays == {1, 2, 3, 4, 5}
    assert parse_cron("5/20 0 1-10/3 * 7").minutes == {5, 25, 45}
    assert parse_cron("5/20 0 1-10/3 * 7").days == {1, 4, 7, 10}
    assert parse_cron("0 0 * * 7").weekdays == {0}  # 7 = Sunday
    d = parse_cron("@daily")
    assert (d.minutes, d.hours, d.days, d.months, d.weekdays) == ({0}, {0}, set(range(1, 32)), set(range(1, 13)),
                                                                  set(range(7)))


def test_next_run():
    t = datetime(2026, 11, 30, 12, 34)  # a Monday
    assert parse_cron("17 3 * * *").next_run(t) == datetime(2026, 12, 1, 3, 17)
    assert parse_cron("*/15 * * * *").next_run(t) == datetime(2026, 11, 30, 12, 45)
    assert parse_cron("0 9 * * sat,sun").next_run(t) == datetime(2026, 12, 5, 9, 0)
    assert parse_cron("@hourly").next_run(t) == datetime(2026, 11, 30, 13, 0)
    assert parse_cron("@yearly").next_run(t) == datetime(2027, 1, 1, 0, 0)
    # day-of-month and day-of-week both restricted: either matches (classic cron)
    assert parse_cron("0 0 13 * fri").next_run(t) == datetime(2026, 12, 4, 0, 0)
    assert parse_cron("0 0 29 2 *").next_run(t) == datetime(2028, 2, 29, 0, 0)
    assert parse_cron("30 12 * * *").next_run(datetime(2026, 11, 30, 12, 30)) == datetime(2026, 12, 1, 12, 30)


@pytest.mark.parametrize("expr, words", [
    ("* * * *", "expected 5 fields"),
    ("60 * * * *", "minute: 60 is out of range 0-59"),
    ("* 24 * * *", "hour: 24 is out of range"),
    ("* * 0 * *", "day-of-month: 0 is out of range 1-31"),
    ("* * * 13 *", "month: 13"),
    ("* * * * 8", "day-of-week: 8"),
    ("*/0 * * * *", "step '0'"),
    ("5-1 * * * *", "runs backwards"),
    ("* * * foo *", "'foo' is not a number"),
    ("1,,2 * * * *", "empty list item"),
    ("0 0 30 2 *", "never fires"),
    ("@reboot", "not a refresh schedule"),
    ("@often", "unknown macro"),
    ("", "empty"),
])
def test_invalid(expr, words):
    with pytest.raises(ConfigError) as e:
        parse_cron(expr)
    assert words in str(e.value)


def test_deploy_examples_match_the_sample_schedule():
    import yaml
    from pipeline_helpers import REPO

    from bookft.pipelines import load_pipeline

    p, icfg = load_pipeline(REPO / "pipelines" / "sample.yaml")
    assert p.name == "sample" and icfg.out == "data/sample" and icfg.sample is not None
    deploy = REPO / "pipelines" / "deploy"
    line = [ln for ln in (deploy / "crontab").read_text().splitlines() if ln[:1].isdigit()][0]
    assert " ".join(line.split()[:5]) == p.schedule and "pipelines/sample.yaml" in line
    job = yaml.safe_load((deploy / "cronjob.yaml").read_text())
    assert job["kind"] == "CronJob" and job["spec"]["schedule"] == p.schedule
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    timer = (deploy / "bookft-pipeline@.timer").read_text()
    s = parse_cron(p.schedule)
    (h,), (m,) = s.hours, s.minutes
    assert f"OnCalendar=*-*-* {h:02d}:{m:02d}:00" in timer
    assert "SuccessExitStatus=3" in (deploy / "bookft-pipeline@.service").read_text()
