"""API keys: looked up in the environment or the OS keyring, never written to our files.

Lookup order for a model (see :func:`lookup_api_key`):

1. the environment variable named by the ``api_key_env`` setting, when set;
2. the provider's usual variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, …, or ``<PROVIDER>_API_KEY``);
3. the OS keyring, service ``ctxbench``, user name = the provider (``openai``, ``anthropic``, …).

Every key found is remembered in memory so :func:`scrub` can remove it from error text, together
with anything that looks like a key or an auth header.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

KEYRING_SERVICE = "ctxbench"

PROVIDER_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "text-completion-openai": "OPENAI_API_KEY",
    "azure": "AZURE_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "perplexity": "PERPLEXITYAI_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "huggingface": "HUGGINGFACE_API_KEY",
}

_NAME_HINTS: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("chatgpt", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gemini"),
    ("mistral", "mistral"),
    ("command", "cohere"),
)

# at least 8 characters of key material after a known prefix
_KEY_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"),  # OpenAI / Anthropic style (sk-ant-…, sk-proj-…)
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),  # Google
    re.compile(r"\bgsk_[A-Za-z0-9]{16,}"),  # Groq
    re.compile(r"\bxai-[A-Za-z0-9]{16,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),
)
_HEADER_PATTERNS = (
    re.compile(r"(?i)(authorization\s*[:=]\s*['\"]?)(?:bearer|basic|token)?\s*[^\s'\",}]+"),
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=\-]{6,}"),
    re.compile(r"(?i)((?:x-api-key|api-key|x-goog-api-key)\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
    re.compile(r"(?i)((?:api_key|apikey|access_token|secret_key)\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}&]+"),
    re.compile(r"(?i)([?&](?:key|api_key|token)=)[^\s&'\"]+"),
)
REDACTED = "[redacted]"

_known: set[str] = set()
_lock = threading.Lock()


def remember_secret(value: str | None) -> None:
    """Make :func:`scrub` remove ``value`` from any text from now on (kept in memory only)."""
    if value and len(value) >= 6:
        with _lock:
            _known.add(value)


def forget_secrets() -> None:
    with _lock:
        _known.clear()


def scrub_known(text: str) -> str:
    """``text`` with the API keys the app knows (loaded ones, and secret-named environment variables)
    replaced by ``[redacted]``; unlike :func:`scrub`, nothing that merely looks like a key is touched.

    For tool outputs: a model that reads a ``.env`` file or runs ``env`` must not receive the key (nor
    store it in the session), while code that mentions ``api_key=...`` must reach it unchanged.
    """
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    for name, value in os.environ.items():
        if value and len(value) >= 8 and _is_secret_env_name(name) and value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub(text: str) -> str:
    """``text`` with API keys, auth headers and key-looking strings replaced by ``[redacted]``."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        text = text.replace(value, REDACTED)
    for name, value in os.environ.items():
        if value and len(value) >= 8 and _is_secret_env_name(name):
            text = text.replace(value, REDACTED)
    for pattern in _HEADER_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def _is_secret_env_name(name: str) -> bool:
    upper = name.upper()
    return upper.endswith(("_API_KEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_ACCESS_KEY")) or upper in (
        "API_KEY",
    )


def provider_of(model: str) -> str:
    """The provider part of a litellm model name (``openai/gpt-4o`` → ``openai``)."""
    model = (model or "").strip()
    if "/" in model:
        return model.split("/", 1)[0].lower()
    lower = model.lower()
    for prefix, provider in _NAME_HINTS:
        if lower.startswith(prefix):
            return provider
    return "openai"


def env_var_for(provider: str) -> str:
    return PROVIDER_ENV.get(provider, re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY")


@dataclass(frozen=True)
class KeyLookup:
    key: str | None
    source: str  # "environment NAME", "keyring", or "none"


def _keyring_get(provider: str) -> str | None:
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, provider)
    except (KeyringError, RuntimeError, OSError):  # no backend, locked, D-Bus down
        return None


def lookup_api_key(model: str, api_key_env: str = "") -> KeyLookup:
    """Find the key for ``model``; see the module docstring for the order. Never raises."""
    names = []
    if api_key_env.strip():
        names.append(api_key_env.strip())
    provider = provider_of(model)
    names.append(env_var_for(provider))
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            remember_secret(value)
            return KeyLookup(value, f"environment {name}")
    stored = _keyring_get(provider)
    if stored:
        remember_secret(stored)
        return KeyLookup(stored, "keyring")
    return KeyLookup(None, "none")


def get_api_key(model: str, api_key_env: str = "") -> str | None:
    return lookup_api_key(model, api_key_env).key


def store_api_key(provider: str, key: str) -> None:
    """Save a key in the OS keyring; raise RuntimeError with a clear message when there is none."""
    if not key.strip():
        raise ValueError("the API key is empty")
    try:
        import keyring
        from keyring.errors import KeyringError

        keyring.set_password(KEYRING_SERVICE, provider, key.strip())
    except ImportError as exc:
        raise RuntimeError(
            "the keyring package is not installed; set the key in an environment variable"
        ) from exc
    except (KeyringError, OSError) as exc:
        raise RuntimeError(
            f"no usable OS keyring ({scrub(str(exc))}); "
            f"set {env_var_for(provider)} in the environment instead"
        ) from None
    remember_secret(key.strip())


def delete_api_key(provider: str) -> bool:
    """Remove a stored key; True when one was removed."""
    try:
        import keyring
        from keyring.errors import KeyringError, PasswordDeleteError

        keyring.delete_password(KEYRING_SERVICE, provider)
        return True
    except ImportError:
        return False
    except PasswordDeleteError:
        return False
    except (KeyringError, OSError):
        return False
