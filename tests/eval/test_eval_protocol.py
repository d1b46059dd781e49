"""Which protocol `bookft eval niah` scores by when the user does not say, and the eval section's one spelling.

RULER phrasing -> RULER's protocol: generated text scored by string match, the chat template where the
tokenizer has one. The tiny default (phrasing short) keeps teacher-forced exact match and no template.
The keys the protocol decides stay None in the typed section ("set nowhere") until eval time.
"""

from pathlib import Path

import pytest

from bookft.commands.eval import load_settings, split_overrides
from bookft.errors import ConfigError
from bookft.eval.config import EvalConfig, resolve_settings, ruler_protocol_defaults
from bookft.train.config import load_run_config

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml"


def test_ruler_phrasing_defaults_to_generation_and_the_chat_template():
    s = load_settings(None, [], {"lengths": [1024]}, has_chat_template=True)
    assert s.phrasing == "ruler" and s.scoring == ("generate",) and s.chat_template is True
    s = load_settings(None, [], {}, has_chat_template=False)
    assert s.scoring == ("generate",) and s.chat_template is False


def test_what_the_user_sets_wins():
    s = load_settings(None, ["eval.chat_template=false"], {"scoring": ["teacher_forced", "generate"]},
                      has_chat_template=True)
    assert s.scoring == ("teacher_forced", "generate") and s.chat_template is False
    s = load_settings(None, [], {}, base=EvalConfig(scoring=("teacher_forced",)), has_chat_template=True)
    assert s.scoring == ("teacher_forced",) and s.chat_template is True


def test_short_phrasing_keeps_the_library_defaults(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("phrasing: short\nlengths: [512]\n")
    s = load_settings(cfg, [], {}, has_chat_template=True)
    assert s.scoring == resolve_settings(EvalConfig()).scoring == ("teacher_forced",) and s.chat_template is False
    assert ruler_protocol_defaults("short", True) == {}


def test_protocol_keys_stay_unset_in_the_typed_section_until_eval_time():
    """The run config's eval section is typed at load; the protocol's keys are None there ("set
    nowhere"), decided by resolve_settings: the RULER protocol under `bookft eval niah`, the library
    defaults for a library call, and the run's data.seq_len ends a spaced grid."""
    ev = load_run_config(TINY, ["eval.phrasing=ruler", "eval.lengths=[]"]).eval
    assert isinstance(ev, EvalConfig) and (ev.scoring, ev.chat_template, ev.max_length) == (None, None, None)
    chat = resolve_settings(ev, has_chat_template=True, seq_len=4096)
    assert (chat.scoring, chat.chat_template, chat.max_length) == (("generate",), True, 4096)
    lib = resolve_settings(ev)
    assert (lib.scoring, lib.chat_template, lib.max_length) == (("teacher_forced",), False, 2048)
    assert resolve_settings(chat) is chat  # deciding twice changes nothing
    s = load_settings(None, [], {}, base=ev, has_chat_template=False, seq_len=1024)
    assert (s.scoring, s.chat_template, s.max_length) == (("generate",), False, 1024)
    s = load_settings(None, ["eval.max_length=512"], {}, base=ev, seq_len=1024)
    assert s.max_length == 512  # what the user sets wins over the run's length


def test_tiny_default_is_scored_as_before():
    s = load_settings(TINY, [], {}, has_chat_template=False)
    assert (s.phrasing, s.scoring, s.chat_template) == ("short", ("teacher_forced",), False)
    assert s.lengths == (1024, 2048) and s.depths == (0, 25, 50, 75, 100) and len(s.seeds) == 10
    s = load_settings(None, [], {}, base=load_run_config(TINY).eval, has_chat_template=False, seq_len=2048)
    assert (s.phrasing, s.scoring, s.chat_template, s.lengths) == ("short", ("teacher_forced",), False, (1024, 2048))


def test_eval_keys_have_one_spelling():
    assert split_overrides(["eval.lengths=[1024]", "attention.strategy=ring"]) == (
        ["lengths=[1024]"], ["attention.strategy=ring"])
    assert load_settings(None, ["eval.lengths=[1024]"], {}).lengths == (1024,)
    with pytest.raises(ConfigError, match=r"--set eval\.lengths=\[1024\]"):
        split_overrides(["lengths=[1024]"])
    with pytest.raises(ConfigError, match=r"--set eval\.lengths=\[1024\]"):
        load_settings(None, ["lengths=[1024]"], {})
    with pytest.raises(ConfigError, match="unknown key lenghts"):
        split_overrides(["lenghts=[1024]"])
    with pytest.raises(ConfigError, match=r"unknown key eval\.lenghts"):
        load_settings(None, ["eval.lenghts=[1024]"], {})


def test_the_run_configs_eval_section_is_typed_and_strict():
    with pytest.raises(ConfigError, match=r"unknown key eval\.lenghts \(known keys here: .*lengths"):
        load_run_config(TINY, ["eval.lenghts=[1024]"])
    with pytest.raises(ConfigError, match=r"eval\.phrasing: expected one of"):
        load_run_config(TINY, ["eval.phrasing=long"])
    with pytest.raises(ConfigError, match=r"eval\.depths"):
        load_run_config(TINY, ["eval.depths=[150]"])
    assert load_run_config(TINY, ["eval.lengths=[512]"]).eval.lengths == (512,)


def test_cli_on_a_chat_model_folder(tmp_path):
    """`bookft eval niah --model` on an HF folder whose tokenizer has a chat template, no scoring flags."""
    import json

    from eval_helpers import byte_bpe
    from typer.testing import CliRunner

    from bookft.cli import app
    from bookft.model import ModelConfig, init_model, save_hf

    config = ModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                         num_kv_heads=1, max_position_embeddings=1024, compute_dtype="float32", remat="none")
    hf = save_hf(init_model(config, seed=0), config, tmp_path / "hf")
    byte_bpe().save(str(hf / "tokenizer.json"))
    template = ("{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    (hf / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "chat_template": template}))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["eval", "niah", "--model", str(hf), "--lengths", "300", "--depths", "50",
                                 "--seeds", "0", "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((out / "results.json").read_text())
    assert res["settings"]["scoring"] == ["generate"] and res["settings"]["chat_template"] is True
    assert res["summary"]["score"] == "generate" and set(res["cells"][0]["scores"]) == {"generate"}
    assert "output" in res["cells"][0]["per_seed"][0] and "teacher_forced" not in res["cells"][0]["per_seed"][0]


def test_needle_spec_has_the_eval_task_knobs():
    """The synthesizer builds its needles from NeedleSpec, the eval from EvalConfig: same knobs, same defaults."""
    import dataclasses

    from bookft.eval.config import EvalConfig
    from bookft.needles import NeedleSpec, make_task

    spec, ev = NeedleSpec(), EvalConfig()
    for f in dataclasses.fields(NeedleSpec):
        assert getattr(spec, f.name) == getattr(ev, f.name), f.name
    a = make_task(NeedleSpec(value_digits=5, phrasing="short"), 3, 50.0)
    b = make_task(EvalConfig(value_digits=5, phrasing="short"), 3, 50.0)
    assert a == b


def test_cli_runs_the_protocol_settings_unchanged(tmp_path):
    """`bookft eval niah` with strict scoring, the test split and a few-shot prompt, set only through the
    settings (`--scoring strict`, `--set eval.split=test`, `--set eval.fewshot=1`): the entry is unchanged."""
    import json

    from eval_helpers import byte_bpe
    from typer.testing import CliRunner

    from bookft.cli import app
    from bookft.model import ModelConfig, init_model, save_hf

    config = ModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                         num_kv_heads=1, max_position_embeddings=2048, compute_dtype="float32", remat="none")
    hf = save_hf(init_model(config, seed=0), config, tmp_path / "hf")
    byte_bpe().save(str(hf / "tokenizer.json"))
    (hf / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["eval", "niah", "--model", str(hf), "--task", "hops", "--lengths", "1400",
                                 "--depths", "50", "--seeds", "0,1", "--scoring", "strict", "--set", "eval.split=test",
                                 "--set", "eval.fewshot=1", "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((out / "results.json").read_text())
    assert res["split"] == "test" and res["seeds"] == [20_000, 20_001] and res["fewshot"] == 1
    assert res["summary"]["score"] == "strict" and set(res["stats"]) == {"strict", "ruler"}
    cell = res["cells"][0]
    assert set(cell["scores"]) == {"strict", "ruler"} and set(cell["ci"]) == {"strict", "ruler"}
    assert res["stats"]["strict"]["draws"] == 2 and len(res["stats"]["strict"]["ci"]) == 2
