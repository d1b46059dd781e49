"""Which protocol `bookft eval niah` scores by when the user does not say (issue 17).

RULER phrasing -> RULER's protocol: generated text scored by string match, the chat template where the
tokenizer has one. The tiny default (phrasing short) keeps teacher-forced exact match and no template.
"""

from pathlib import Path

from bookft.eval.config import EvalConfig, ruler_protocol_defaults
from bookft.eval.entry import load_settings

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
    s = load_settings(None, [], {}, base={"scoring": ["teacher_forced"]}, has_chat_template=True)
    assert s.scoring == ("teacher_forced",) and s.chat_template is True


def test_short_phrasing_keeps_the_library_defaults(tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("phrasing: short\nlengths: [512]\n")
    s = load_settings(cfg, [], {}, has_chat_template=True)
    assert s.scoring == EvalConfig().scoring == ("teacher_forced",) and s.chat_template is False
    assert ruler_protocol_defaults({"phrasing": "short"}, True) == {}


def test_tiny_default_is_scored_as_before():
    s = load_settings(TINY, [], {}, has_chat_template=False)
    assert (s.phrasing, s.scoring, s.chat_template) == ("short", ("teacher_forced",), False)
    assert s.lengths == (1024, 2048) and s.depths == (0, 25, 50, 75, 100) and len(s.seeds) == 10


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
