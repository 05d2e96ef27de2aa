"""engine.store.secrets: key lookup order (environment, keyring) and scrubbing of error text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.errors import KeyringError

from engine.store import secrets
from tests.memkeyring import MemoryKeyring


class BrokenKeyring(MemoryKeyring):
    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringError("no D-Bus session")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringError("no D-Bus session")


@pytest.fixture
def memory_keyring(memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_KEY", "ACME_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    secrets.forget_secrets()
    yield memory_keyring
    secrets.forget_secrets()


def test_provider_of() -> None:
    assert secrets.provider_of("openai/gpt-4o") == "openai"
    assert secrets.provider_of("anthropic/claude-3-5-sonnet") == "anthropic"
    assert secrets.provider_of("claude-3-haiku") == "anthropic"
    assert secrets.provider_of("gpt-4o-mini") == "openai"
    assert secrets.provider_of("local/smollm2-135m-instruct") == "local"
    assert secrets.env_var_for("openai") == "OPENAI_API_KEY"
    assert secrets.env_var_for("acme-ai") == "ACME_AI_API_KEY"


def test_lookup_order(memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch) -> None:
    assert secrets.lookup_api_key("openai/gpt-4o") == secrets.KeyLookup(None, "none")
    memory_keyring.set_password("ctxbench", "openai", "sk-from-keyring-123456")
    assert secrets.lookup_api_key("openai/gpt-4o") == secrets.KeyLookup("sk-from-keyring-123456", "keyring")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-default-env-1234")
    found = secrets.lookup_api_key("openai/gpt-4o")
    assert found == secrets.KeyLookup("sk-from-default-env-1234", "environment OPENAI_API_KEY")
    monkeypatch.setenv("MY_KEY", "sk-from-named-env-12345")
    found = secrets.lookup_api_key("openai/gpt-4o", api_key_env="MY_KEY")
    assert found == secrets.KeyLookup("sk-from-named-env-12345", "environment MY_KEY")
    assert secrets.get_api_key("openai/gpt-4o", "MY_KEY") == "sk-from-named-env-12345"


def test_broken_keyring_is_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring())
    monkeypatch.delenv("ACME_API_KEY", raising=False)
    try:
        assert secrets.lookup_api_key("acme/model").key is None
        with pytest.raises(RuntimeError, match="ACME_API_KEY"):
            secrets.store_api_key("acme", "k-123456789")
    finally:
        keyring.set_keyring(previous)


def test_store_and_delete(memory_keyring: MemoryKeyring, tmp_path: Path) -> None:
    secrets.store_api_key("openai", " sk-stored-abcdefgh ")
    assert memory_keyring.store[("ctxbench", "openai")] == "sk-stored-abcdefgh"
    assert secrets.get_api_key("gpt-4o") == "sk-stored-abcdefgh"
    assert secrets.delete_api_key("openai") is True
    assert secrets.delete_api_key("openai") is False
    with pytest.raises(ValueError, match="empty"):
        secrets.store_api_key("openai", "  ")


def test_keys_never_written_to_our_files(memory_keyring: MemoryKeyring, tmp_path: Path) -> None:
    from engine.store.config import Settings, save_settings

    secrets.store_api_key("openai", "sk-never-on-disk-9876")
    path = save_settings(Settings(model="openai/gpt-4o", api_key_env="OPENAI_API_KEY"), tmp_path / "s.toml")
    assert "sk-never-on-disk" not in path.read_text()


def test_scrub_known_and_pattern_keys(memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "plainsecretvalue42")
    secrets.remember_secret("custom-secret-xyz")
    text = (
        "401 for key sk-proj-ABCDEFGH12345678 with custom-secret-xyz; headers "
        "{'Authorization': 'Bearer abcdef123456', 'x-api-key': 'zzz-top'} url https://h/v1?key=AIzaSyA1234567890"
        "1234567890 env plainsecretvalue42 api_key=hunter2hunter"
    )
    out = secrets.scrub(text)
    for leaked in ("sk-proj-ABCDEFGH", "custom-secret-xyz", "abcdef123456", "zzz-top", "AIzaSy",
                   "plainsecretvalue42", "hunter2hunter"):
        assert leaked not in out, (leaked, out)
    assert out.startswith("401 for key [redacted]")
    assert "Authorization" in out and "[redacted]" in out


def test_scrub_leaves_normal_text() -> None:
    text = "This model's maximum context length is 8192 tokens. sk is short: sk-1"
    assert secrets.scrub(text) == text
    assert secrets.scrub("") == ""
