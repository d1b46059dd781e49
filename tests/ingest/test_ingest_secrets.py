"""Secrets planted in a code repository (AWS key, PEM private key, GitHub token) are redacted before
tokenization, counted per source and listed by file, line and kind; never the value. No false positive on
the bookft package itself; the fast scan finds what detect-secrets' own loop finds."""

import json
import random
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bookft
from bookft.cli import app
from bookft.ingest.config import ExtractConfig, LimitsConfig, SecretsConfig
from bookft.ingest.filters.secrets import SecretScanner
from bookft.ingest.formats.code import extract_code
from bookft.ingest.sources import extract, resolve_sources

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def planted():
    """(AWS access key id, PEM private key, GitHub token): made at run time, so this file holds none."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    rng = random.Random(7)
    aws = "AKIA" + "".join(rng.choice(ALNUM[:26] + ALNUM[52:]) for _ in range(16))
    gh = "ghp" + "_" + "".join(rng.choice(ALNUM) for _ in range(36))
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.NoEncryption()).decode()
    return aws, pem, gh


@pytest.fixture
def repo(tmp_path):
    aws, pem, gh = planted()
    r = tmp_path / "repo"
    (r / "deploy").mkdir(parents=True)
    (r / ".git").mkdir()
    (r / "README.md").write_text("# Service\n\nDeploys the thing.\n")
    (r / "settings.py").write_text(f'"""Settings."""\n\nREGION = "eu-west-1"\nAWS_ACCESS_KEY_ID = "{aws}"\n'
                                   "TIMEOUT = 30\n")
    (r / "deploy" / "id_rsa").write_text(f"# deploy key\n{pem}# end\n")
    (r / "deploy" / "ci.yml").write_text(f"steps:\n  - run: make\n    env:\n      GH: {gh}\n")
    return r, (aws, pem, gh)


def test_planted_secrets_are_redacted_counted_and_listed(repo):
    r, (aws, pem, gh) = repo
    (job,), _ = resolve_sources([(str(r), "auto", None)], ExtractConfig(), LimitsConfig())
    res = extract(job)
    (doc,) = res.documents
    body = pem.splitlines()[1]
    assert not any(v in doc.text for v in (aws, gh, gh[4:], aws[4:], body, "PRIVATE KEY"))
    assert res.secrets == [{"source": f"{r}/deploy/ci.yml", "line": 4, "kind": "GitHub Token"},
                           {"source": f"{r}/deploy/id_rsa", "line": 2, "kind": "Private Key"},
                           {"source": f"{r}/settings.py", "line": 4, "kind": "AWS Access Key"}]
    assert res.stats["secrets"] == 3
    assert "      GH: [REDACTED:GitHub Token]\n\n=== FILE: deploy/id_rsa" in doc.text
    assert "# deploy key\n[REDACTED:Private Key]\n# end" in doc.text
    assert 'AWS_ACCESS_KEY_ID = "[REDACTED:AWS Access Key]"\nTIMEOUT = 30' in doc.text
    off = ExtractConfig(secrets=SecretsConfig(code=False))
    (job,), _ = resolve_sources([(str(r), "auto", None)], off, LimitsConfig())
    res = extract(job)
    assert aws in res.documents[0].text and gh in res.documents[0].text and res.secrets == []


def test_manifest_and_inspect_list_secrets_never_their_values(repo, tmp_path):
    r, (aws, pem, gh) = repo
    runner = CliRunner()
    out = tmp_path / "corpus"
    res = runner.invoke(app, ["ingest", str(r), "--out", str(out), "--workers", "0", "--vocab-size", "300",
                              "--seq-len", "128"])
    assert res.exit_code == 0, res.output
    s = json.loads(runner.invoke(app, ["inspect", str(out), "--json"]).stdout)
    assert s["secrets_redacted"] == 3 and s["secrets"]["per_source"] == {str(r): 3}
    assert [(Path(f["source"]).name, f["line"], f["kind"]) for f in s["secrets"]["findings"]] == [
        ("ci.yml", 4, "GitHub Token"), ("id_rsa", 2, "Private Key"), ("settings.py", 4, "AWS Access Key")]
    table = runner.invoke(app, ["inspect", str(out)]).stdout
    assert "redacted secrets" in table and "AWS Access Key" in table
    secret_bytes = [v.encode() for v in (aws, gh, gh[4:], pem.splitlines()[1])]
    for f in out.rglob("*"):  # corpus, caches, manifest, tokenizer: nowhere
        if f.is_file():
            data = f.read_bytes()
            assert not any(v in data for v in secret_bytes), f
    res = runner.invoke(app, ["ingest", str(r), "--out", str(tmp_path / "plain"), "--workers", "0",
                              "--vocab-size", "300", "--seq-len", "128", "--no-secret-scan"])
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "plain" / "current" / "manifest.json").read_text())
    assert m["counts"]["secrets_redacted"] == 0 and m["secrets"]["scanned"] == {"code": False, "legal": False}


def test_no_false_positive_on_the_bookft_package():
    root = Path(bookft.__file__).parent
    with SecretScanner() as s:
        res = extract_code(root, "bookft", secrets=s)
    assert res.documents and res.stats["files"] > 50
    assert res.secrets == []


SAMPLES = [  # lines that detect-secrets' plugins look at, with and without a finding
    'password = "hunter2-but-longer"', "db_pass: s3cr3t-value", 'api_key = os.environ["API_KEY"]',
    "url = 'https://user:Pa55w0rdXyz@example.com/path'", 'token = "xoxb-123456789012-1234567890123-AbCdEfGhIjKl"',
    'h = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"', 'x = "0123456789abcdef"',
    'jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"',
    "b = 'QWxhZGRpbjpvcGVuIHNlc2FtZSBmb3IgYWxsIG9mIHVzIHRvZGF5'", "secret = 'abc'  # pragma: allowlist secret",
    "plain line of prose with nothing in it", "uuid = 'a3bb189e-8bf9-3888-9912-ace4e6543002'",
]


def test_fast_scan_finds_what_detect_secrets_own_loop_finds(repo):
    from detect_secrets.core.scan import _process_line_based_plugins

    r, _ = repo
    texts = {p.relative_to(r).as_posix(): p.read_text() for p in r.rglob("*") if p.is_file()}
    texts.update({"conf.py": "\n".join(SAMPLES), "conf.yaml": "\n".join(SAMPLES), "notes.txt": "\n".join(SAMPLES)})
    root = Path(bookft.__file__).parent
    texts.update({p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))[:40]})
    with SecretScanner() as s:
        total = 0
        for name, text in texts.items():
            ours = {(f.line, f.kind) for f in s.scan_all(text, name)}
            lines = text.split("\n")
            theirs = {(x.line_number, x.type) for x in _process_line_based_plugins(list(enumerate(lines, 1)), name)}
            assert ours == theirs, name
            total += len(ours)
    assert total >= 15  # the comparison saw findings of many kinds, not only empty sets


def test_whole_tokens_go_whatever_part_the_plugin_reports():
    rng = random.Random(3)
    r = lambda n, al=ALNUM: "".join(rng.choice(al) for _ in range(n))  # noqa: E731
    hexd = "0123456789abcdef"
    tokens = {"GitLab Token": "glpat-" + r(20), "Slack Token": "xoxb-123456789012-1234567890123-" + r(24, hexd),
              "Twilio API Key": "SK" + r(32, hexd), "SendGrid API Key": "SG." + r(22) + "." + r(43),
              "Telegram Bot Token": "123456789:" + r(35), "Mailchimp Access Key": r(32, hexd) + "-us12",
              "JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + r(43),  # the plugin stops
              "GitHub Token": "ghp" + "_" + r(36), "AWS Access Key": "AKIA" + r(16, ALNUM[:26]),  # early
              "Stripe Access Key": "sk" + "_live_" + r(24)}
    text = "\n".join(f'{k.split()[0].lower()} = "{v}"' for k, v in tokens.items())
    with SecretScanner() as s:
        red, found = s.redact(text, "conf.py")
    assert [f.kind for f in found] == list(tokens)  # the named kind, the entropy finding on the same string dropped
    assert red.split("\n") == [f'{k.split()[0].lower()} = "[REDACTED:{k}]"' for k in tokens]


def test_legal_sources_are_scanned_when_asked(tmp_path):
    aws, _, _ = planted()
    z = tmp_path / "law.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("exhibits.jsonl", json.dumps({"case_name": "A v. B", "text": f"Exhibit 4 shows key {aws} in a "
                                                  "config file."}) + "\n")
    for legal, redacted in ((False, 0), (True, 1)):
        (job,), _ = resolve_sources([(str(z), "auto", None)], ExtractConfig(secrets=SecretsConfig(legal=legal)),
                                    LimitsConfig())
        res = extract(job)
        assert (aws in res.documents[0].text) == (not redacted) and len(res.secrets) == redacted
    assert res.secrets == [{"source": f"{z}:exhibits.jsonl#L1", "line": 1, "kind": "AWS Access Key"}]
