"""benchmarks/maxtext_compare.py without MaxText: the longest-sequence search against fake compiles
(it stays within its budget, keeps the longest fit, and asks both tools the same lengths), the
result entry's shape and ratios, and the MaxText flags that make its step equal to bookft's."""

from __future__ import annotations

import json

import pytest

from benchmarks import maxtext_compare as compare
from benchmarks import maxtext_worker as worker
from benchmarks.maxtext_compare import M, next_length, ratios, search_longest, tool_entry

CAP = 89.2


def fake_tool(gib_per_m: float, base: float, hard_limit: int | None = None):
    """A compile whose peak is linear in length and that fails past `hard_limit` (host memory)."""
    calls: list[int] = []

    def probe(n: int) -> dict:
        calls.append(n)
        peak = base + gib_per_m * n / M
        ok = peak <= CAP and (hard_limit is None or n <= hard_limit)
        return {"seq_len": n, "fits": ok, "peak_gib": peak if hard_limit is None or n <= hard_limit else None}

    return probe, calls


def known(probe) -> dict[int, dict]:
    return {n: probe(n) for n in (M, 4 * M)}


def test_search_finds_the_edge_within_budget():
    probe, calls = fake_tool(2.5, 2.0)  # fits up to floor((89.2 - 2) / 2.5) = 34M
    cells = known(probe)
    calls.clear()
    longest, tried, done = search_longest(probe, cells, CAP, budget=4)
    assert len(calls) == len(tried) <= 4
    assert all(n % M == 0 for n in calls)
    assert calls[0] == 16 * M  # at most 4x the longest known fit
    assert longest == 34 * M and done


def test_search_bisects_after_a_failure():
    probe, calls = fake_tool(2.5, 2.0, hard_limit=29 * M)  # peaks predict 34M, host memory stops at 29M
    cells = known(probe)
    calls.clear()
    longest, tried, done = search_longest(probe, cells, CAP, budget=4)
    assert calls == [16 * M, 34 * M, 25 * M, 29 * M]
    assert [t["fits"] for t in tried] == [True, False, True, True]
    assert longest == 29 * M and done


def test_stop_keeps_the_longest_fit_as_a_lower_bound():
    probe, calls = fake_tool(2.5, 2.0)
    cells = known(probe)
    calls.clear()
    longest, tried, done = search_longest(probe, cells, CAP, stop=lambda n: len(calls) >= 1)
    assert calls == [16 * M] and longest == 16 * M and not done
    entry = tool_entry("bookft", "v5p-128", 64, cells, longest, tried, done)
    assert entry["longest_is_lower_bound"] and entry["search"][0]["seq_len"] == 16 * M


def test_same_schedule_for_both_tools_given_the_same_answers():
    a, calls_a = fake_tool(3.0, 5.0)
    b, calls_b = fake_tool(3.0, 5.0)
    assert search_longest(a, known(a), CAP) == search_longest(b, known(b), CAP)
    assert calls_a == calls_b


def test_next_length_stops_when_the_gap_is_one_unit():
    assert next_length({8 * M: 40.0}, [9 * M], CAP) is None
    assert next_length({8 * M: 40.0}, [12 * M], CAP) == 10 * M
    assert next_length({8 * M: 40.0}, [], CAP) == 17 * M  # 8M + (89.2 - 40) / 5 GiB per M, floored


def test_an_interrupted_compile_ends_the_search_without_counting_as_a_failure():
    probe, calls = fake_tool(2.5, 2.0)
    cells = known(probe)
    answers = iter([{"seq_len": 16 * M, "fits": True, "peak_gib": 42.0}, {"seq_len": 34 * M, "fits": None}])
    longest, tried, done = search_longest(lambda n: next(answers), cells, CAP)
    assert longest == 16 * M and len(tried) == 2 and not done
    cells[4 * M] = {"fits": None}
    del cells[M]
    assert search_longest(probe, cells, CAP) == (None, [], False)


def test_no_fitting_start_means_no_search():
    probe, calls = fake_tool(100.0, 0.0)
    cells = known(probe)
    calls.clear()
    assert search_longest(probe, cells, CAP) == (None, [], True)
    assert calls == []


def test_entry_shape_and_ratios_are_json():
    vers = {"jax": "0.12.0.1", "libtpu": "0.0.52", "python": "3.12.1"}
    cells_b = {M: {"fits": True, "peak_gib": 4.0, "versions": vers}, 4 * M: {"fits": True, "peak_gib": 12.0}}
    cells_m = {M: {"fits": True, "peak_gib": 8.0, "versions": vers}, 4 * M: {"fits": True, "peak_gib": 20.0}}
    tools = {"bookft": tool_entry("bookft", "v5p-128", 64, cells_b, 30 * M, []),
             "maxtext": tool_entry("maxtext", "v5p-128", 64, cells_m, 15 * M, [{"seq_len": 16 * M, "fits": False}])}
    back = json.loads(json.dumps({"tools": tools}))["tools"]
    for e in back.values():
        assert set(e["settings"]) >= {"topology", "batch", "remat", "strategy", "cp", "dtype"}
        assert e["settings"]["cp"] == 64 and e["settings"]["strategy"] == "ring"
        assert e["versions"]["jax"] == "0.12.0.1" and e["versions"]["libtpu"] == "0.0.52"
        assert set(e["peak_gib"]) == {"1M", "4M"}
    assert back["maxtext"]["search"][0]["seq_len"] == 16 * M
    r = ratios(tools)
    assert r["peak_1M"] == pytest.approx(0.5) and r["peak_4M"] == pytest.approx(0.6)
    assert r["longest"] == pytest.approx(2.0) and not r["longest_from_lower_bounds"]
    tools["maxtext"]["longest_is_lower_bound"] = True  # its search was cut short
    r = ratios(tools)
    assert r["longest"] is None and r["longest_at_most"] == pytest.approx(2.0)


def test_logged_results_reused_by_command(tmp_path):
    """A logged result is reused for the same command, its worker script in any checkout."""
    log = tmp_path / "compiles.log"
    row = {"tool": "maxtext", "seq_len": M, "fits": True, "peak_gib": 6.5, "compile_s": 100.0}
    cmd = ["nice", "-n", "10", "py312", "/elsewhere/checkout/benchmarks/maxtext_worker.py", "--tool", "maxtext",
           "--seq-len", str(M), "--topology", "v5p-128"]
    log.write_text(f"$ {' '.join(cmd)}\nnoise\n{compare.RESULT_TAG}{json.dumps(row)}\n\nstderr\n"
                   f"$ other command\nno result line\n")
    reuse = compare.logged_results(log)
    assert list(reuse) == [compare.command_key(cmd)]
    assert compare.command_key(cmd) == compare.command_key(compare.worker_cmd("py312", "maxtext", M, "v5p-128"))
    got = compare.run_worker("py312", "maxtext", M, "v5p-128", log, reuse)  # no process started
    assert got["peak_gib"] == 6.5 and got["reused_from"] == str(log)
    assert compare.RESULT_TAG == worker.RESULT_TAG


def test_maxtext_flags_match_bookfts_preset():
    flags = dict(f.split("=", 1) for f in worker.maxtext_flags(4 * M, "v5p-128", 64))
    assert flags["max_target_length"] == str(4 * M)
    assert float(flags["per_device_batch_size"]) * 64 == 1.0  # one sequence per step
    assert flags["ici_context_parallelism"] == "64" and flags["ici_fsdp_parallelism"] == "1"
    assert flags["context_parallel_strategy"] == "ring" and flags["use_tokamax_splash"] == "true"
    assert (flags["remat_policy"], flags["decoder_layer_input"]) == ("custom", "offload")
    assert (flags["dtype"], flags["weight_dtype"]) == ("bfloat16", "float32")
    assert flags["sa_block_q"] == flags["sa_block_kv"] == "512"
    assert worker.exhausted("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm")
    assert not worker.exhausted("ValueError: bad flag")


def test_only_one_tool_compiles_the_other_reads_the_log():
    key = lambda n: f"--tool maxtext --seq-len {n}"  # noqa: E731
    reuse = {key(M): {"fits": True}}
    never = lambda: False  # noqa: E731
    held = compare.stopper(key, reuse, never, held=True)
    assert not held(M) and held(4 * M)  # logged lengths are read back, new ones are not compiled
    free = compare.stopper(key, reuse, never)
    assert not free(M) and not free(4 * M)
    late = compare.stopper(key, None, lambda: True)
    assert late(M)
    probe, calls = fake_tool(2.5, 2.0)
    cells = known(probe)
    calls.clear()
    longest, tried, done = search_longest(probe, cells, CAP, stop=held)
    assert (longest, tried, done, calls) == (4 * M, [], False, [])
