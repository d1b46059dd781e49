"""The benchmark record: one header, and result files that a rerun never overwrites."""

import json

import pytest

from bookft.benchrecord import record_header, result_path, write_result


def test_header_names_machine_commit_versions_and_command():
    h = record_header(["benchmarks/x.py", "--seed", "1"])
    assert h["command"] == "benchmarks/x.py --seed 1"
    assert h["machine"]["cpus"] >= 1 and h["machine"]["hardware"].startswith("cpu")
    assert "jax" in h["versions"] and h["started"]


def test_rerun_never_overwrites(tmp_path):
    import datetime as dt

    day = dt.date(2026, 12, 6)
    p1 = result_path("gpu_compare", "1b/32k", "h100", results=tmp_path, date=day)
    assert p1.name == "gpu_compare_1b-32k_h100_2026-12-06.json"
    write_result(p1, record_header([]), {"score": 1})
    p2 = result_path("gpu_compare", "1b/32k", "h100", results=tmp_path, date=day)
    assert p2.name == "gpu_compare_1b-32k_h100_2026-12-06_2.json"
    with pytest.raises(FileExistsError):
        write_result(p1, record_header([]), {"score": 2})
    data = json.loads(p1.read_text())
    assert data["score"] == 1 and "load_avg_end" in data and "machine" in data


def test_latest_reads_the_newest_of_its_own_bench(tmp_path):
    from benchmarks.common import latest

    for name, v in [("real_flow_full-seed0_cpu2_2026-12-03.json", 1), ("real_flow_full-seed0_cpu2_2026-12-06.json", 2),
                    ("real_flow_full-seed0_cpu2_2026-12-06_2.json", 3),
                    ("real_flow_checks_full-seed0_cpu2_2026-12-09.json", 9)]:
        (tmp_path / name).write_text(json.dumps({"v": v}))
    assert latest("real_flow", tmp_path) == {"v": 3}  # not real_flow_checks' newer file
    assert latest("real_flow_checks", tmp_path) == {"v": 9}
    assert latest("plan", tmp_path) is None
