"""`bookft import` on small files written here: clear errors for bad GGUF files, and a folder import.

The real GGUF model (SmolLM2-135M) is converted in test_model_real.py; these need only gguf + torch.
"""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

import typer  # noqa: E402
from hf_tiny import make_hf_model, torch_logits  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from bookft.commands.model import register  # noqa: E402
from bookft.errors import ModelError  # noqa: E402
from bookft.model import forward_logits, importer, load_hf  # noqa: E402
from bookft.model.importer import import_model  # noqa: E402

CHAT = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def _write_gguf(path, arch="llama", q8k=False, version=None):
    from gguf import GGMLQuantizationType, GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_tensor("token_embd.weight", np.arange(4 * 32, dtype=np.float32).reshape(4, 32))
    if q8k:  # Q8_K is llama.cpp's intermediate type: gguf-py cannot dequantize it
        w.add_tensor("blk.0.attn_q.weight", np.zeros((1, 292), np.uint8), raw_dtype=GGMLQuantizationType.Q8_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version is not None:
        data = bytearray(path.read_bytes())
        data[4:8] = int(version).to_bytes(4, "little")
        path.write_bytes(bytes(data))
    return path


def test_small_gguf_header_reads(tmp_path):
    from bookft.model.gguf_header import read_gguf_header

    h = read_gguf_header(_write_gguf(tmp_path / "a.gguf"))
    assert h.architecture == "llama" and h.version == 3
    assert [(t.name, t.shape, t.type_id) for t in h.tensors] == [("token_embd.weight", (32, 4), 0)]
    assert h.data_start + 4 * 32 * 4 == h.file_size


def test_not_a_gguf_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("just some text, not a model\n")
    with pytest.raises(ModelError, match=r"model\.gguf: not a GGUF file \(it starts with b'just'"):
        import_model(bad, tmp_path / "out")


def test_unknown_architecture(tmp_path):
    src = _write_gguf(tmp_path / "m.gguf", arch="mamba")
    with pytest.raises(ModelError, match=r"m\.gguf: GGUF architecture 'mamba' is not supported by bookft "
                                         r"\(supported: llama, mistral, qwen2, qwen3"):
        import_model(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unsupported_quantization(tmp_path):
    src = _write_gguf(tmp_path / "m.gguf", q8k=True)
    with pytest.raises(ModelError, match=r"m\.gguf: quantization Q8_K \(1 tensors, e\.g\. 'blk\.0\.attn_q\.weight'\) "
                                         r"cannot be dequantized"):
        import_model(src, tmp_path / "out")


@pytest.mark.parametrize("keep", [30, 200, -8])  # inside the header, inside the metadata, in the tensor data
def test_truncated_gguf(tmp_path, keep):
    full = _write_gguf(tmp_path / "full.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full[:keep])
    with pytest.raises(ModelError, match=r"cut\.gguf: truncated: .*download or copy the file again"):
        import_model(cut, tmp_path / "out")


def test_unsupported_version_and_corrupt_counts(tmp_path):
    with pytest.raises(ModelError, match="GGUF version 1 is not supported"):
        import_model(_write_gguf(tmp_path / "v1.gguf", version=1), tmp_path / "out")
    data = bytearray(_write_gguf(tmp_path / "c.gguf").read_bytes())
    data[16:24] = (10**15).to_bytes(8, "little")  # metadata key count
    (tmp_path / "c.gguf").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"c\.gguf: header claims 1 tensors and 1000000000000000 metadata keys"):
        import_model(tmp_path / "c.gguf", tmp_path / "out")


def test_missing_extra(tmp_path, monkeypatch):
    real = importer.importlib.util.find_spec
    monkeypatch.setattr(importer.importlib.util, "find_spec",
                        lambda name, *a: None if name == "accelerate" else real(name, *a))
    with pytest.raises(ModelError, match=r"importing .*m\.gguf needs accelerate \(the gguf extra\): "
                                         r"pip install 'bookft\[gguf\]'"):
        import_model(_write_gguf(tmp_path / "m.gguf"), tmp_path / "out")


def _tiny_folder(path):
    """A random transformers llama (vocab 300) with a word-level tokenizer that has a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    hf = make_hf_model("llama", seed=3)
    hf.save_pretrained(path)
    vocab = {"<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2, **{f"w{i}": i for i in range(3, 300)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<|im_start|>",
                                   eos_token="<|im_end|>", chat_template=CHAT)
    fast.save_pretrained(path)
    return hf


def test_folder_import_via_cli(tmp_path):
    hf = _tiny_folder(tmp_path / "src")
    app = typer.Typer()
    register(app)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["import", str(tmp_path / "src"), str(out), "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    assert "chat template: yes" in result.output
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == CHAT
    assert (out / "model.safetensors").is_file() and not list(tmp_path.glob(".out.importing-*"))
    assert (out / "model.safetensors").stat().st_mode & 0o044 == (out / "config.json").stat().st_mode & 0o044
    ids = np.arange(20, dtype=np.int64)[None] % 300
    import torch
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    model, config = load_hf(out)
    assert config.num_layers == 2 and config.vocab_size == 300
    expected = torch_logits(hf, ids, np.arange(20)[None])
    np.testing.assert_allclose(forward_logits(model, ids.astype(np.int32)), expected, atol=0.05, rtol=0)
    # a second import into the model folder is refused without --overwrite, allowed with it
    with pytest.raises(ModelError, match="already holds a model"):
        import_model(tmp_path / "src", out)
    assert import_model(tmp_path / "src", out, overwrite=True).dtype == "float32"
    model, _ = load_hf(out)
    np.testing.assert_allclose(forward_logits(model, ids.astype(np.int32)), expected, atol=1e-4, rtol=0)


def test_special_tokens_follow_the_gguf_metadata(tmp_path):
    from transformers import AutoTokenizer

    _tiny_folder(tmp_path / "src")
    tok = AutoTokenizer.from_pretrained(tmp_path / "src")
    tok.eos_token = "<|im_start|>"  # as transformers 5.17 converts SmolLM2's GGUF
    meta = {"tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.padding_token_id": 2, "tokenizer.ggml.unknown_token_id": 9999}  # out of range: kept
    assert importer.align_special_tokens(tok, meta) == {"eos_token": "<|im_end|>", "pad_token": "<|im_end|>"}
    tok.save_pretrained(tmp_path / "out")
    again = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert (again.bos_token_id, again.eos_token_id, again.pad_token_id, again.unk_token) == (1, 2, 2, "<unk>")
    assert importer.align_special_tokens(again, meta) == {}


def test_folder_refusals(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 10}))
    with pytest.raises(ModelError, match=r"config\.json: model_type 'gpt2' is not supported"):
        import_model(src, tmp_path / "out")
    quantized = {"model_type": "llama", "quantization_config": {"quant_method": "awq"}}
    (src / "config.json").write_text(json.dumps(quantized))
    with pytest.raises(ModelError, match=r"config\.json: a awq checkpoint; import the unquantized model"):
        import_model(src, tmp_path / "out")
    (src / "config.json").write_text(json.dumps({"model_type": "llama", "bookft_short_conv": 8}))
    with pytest.raises(ModelError, match=r"a bookft folder with layers transformers lacks \(bookft_short_conv\)"):
        import_model(src, tmp_path / "out")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ModelError, match="busy: not empty and not a model folder"):
        import_model(src, busy, overwrite=True)
    with pytest.raises(ModelError, match="no such file or folder"):
        import_model(tmp_path / "nope.gguf", tmp_path / "out")
