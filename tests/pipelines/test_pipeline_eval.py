"""The eval post-step end to end: a tiny random HF model, NIAH on the version just published."""

import json

import yaml
from pipeline_helpers import make_sources, text

from bookft.pipelines import EXIT_OK, run_pipeline


def test_eval_post_step_runs_on_the_new_version(tmp_path):
    from bookft.model import init_model, save_hf
    from bookft.model.config import ModelConfig

    src = make_sources(tmp_path / "src", range(4))
    cfg = ModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                      num_kv_heads=1, head_dim=16, max_position_embeddings=2048)
    save_hf(init_model(cfg), cfg, tmp_path / "model")
    base = {"sources": [{"path": str(src)}], "out": str(tmp_path / "corpus"), "tokenizer": {"vocab_size": 320},
            "seq_len": 128, "workers": 0}
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(base))
    assert run_pipeline(path)[0] == EXIT_OK
    tok = str(tmp_path / "corpus" / "versions" / "0001" / "tokenizer" / "tokenizer.json")
    post = {"eval": {"model": str(tmp_path / "model"), "tokenizer": tok,
                     "settings": {"lengths": [1024], "depths": [50], "seeds": [0], "batch_size": 1}}}
    path.write_text(yaml.safe_dump({**base, "post": post}))
    (src / "doc7.txt").write_text(text(7))
    code, r = run_pipeline(path)
    ev = r["post"]["eval"]
    assert code == EXIT_OK and r["result"] == "ok" and ev["ok"], ev.get("error")
    # RULER phrasing (the default) is scored RULER's way: generated text, string match
    assert ev["settings"]["corpus"].endswith("versions/0002") and ev["score"] == "generate"
    assert 0.0 <= ev["mean"] <= 1.0
    res = json.loads((tmp_path / "corpus" / "runs" / "eval" / "0002" / "results.json").read_text())
    assert res["settings"]["haystack"] == "corpus" and res["lengths"] == [1024]
    assert not run_pipeline(path)[1].get("post")  # nothing new published: the eval does not run again
