"""Credentials never reach a capture file: credential headers and query parameters are replaced by
:data:`REDACTED`, and their values are removed from anything else written (a body or an error that echoes them)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlencode

REDACTED = "[redacted]"
# header names that carry a credential (compared lower-case); any name containing one of SECRET_PARTS too
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key",
                            "cookie", "set-cookie", "openai-organization", "openai-project",
                            "chatgpt-account-id", "anthropic-admin-key"})
SECRET_PARTS = ("key", "token", "secret", "auth", "password", "cookie", "signature", "credential")
SECRET_PARAMS = frozenset({"key", "api_key", "apikey", "api-key", "access_token", "token", "auth", "sig",
                           "signature", "x-goog-api-key", "code"})
MIN_SECRET = 6  # shorter values are not searched for in bodies (they would match ordinary text)
_BEARER = re.compile(r"^\s*(bearer|basic|token)\s+", re.IGNORECASE)


def is_secret_header(name: str) -> bool:
    low = name.lower()
    return low in SECRET_HEADERS or any(part in low for part in SECRET_PARTS)


def is_secret_param(name: str) -> bool:
    low = name.lower()
    return low in SECRET_PARAMS or any(part in low for part in ("key", "token", "secret", "password"))


def header_pairs(headers: Iterable[tuple[str, str]]) -> tuple[list[list[str]], set[str]]:
    """The headers as ``[name, value]`` pairs with credential values replaced, and the secret values taken out
    (a ``Bearer`` value also without its scheme), to be removed from anything else written."""
    out: list[list[str]] = []
    secrets: set[str] = set()
    for name, value in headers:
        if is_secret_header(name):
            out.append([name, REDACTED])
            secrets.add(value)
            bare = _BEARER.sub("", value)
            secrets.add(bare)
            secrets.update(part.strip() for part in re.split(r"[;,]", bare) if "=" not in part)
            secrets.update(part.split("=", 1)[1].strip() for part in re.split(r"[;,]", bare) if "=" in part)
        else:
            out.append([name, value])
    return out, {s for s in secrets if len(s) >= MIN_SECRET}


def query_without_secrets(query: str) -> tuple[str, set[str]]:
    """A URL's query string with credential parameters' values redacted, and those values."""
    if not query:
        return "", set()
    pairs = parse_qsl(query, keep_blank_values=True)
    secrets = {v for k, v in pairs if is_secret_param(k) and len(v) >= MIN_SECRET}
    if not any(is_secret_param(k) for k, _ in pairs):
        return query, set()
    return urlencode([(k, REDACTED if is_secret_param(k) else v) for k, v in pairs], safe="[]:/"), secrets


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by :data:`REDACTED`."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_obj(value: object, secrets: set[str]) -> object:
    """A JSON value with the secrets removed from every string in it."""
    if not secrets:
        return value
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, list):
        return [scrub_obj(v, secrets) for v in value]
    if isinstance(value, Mapping):
        return {scrub(str(k), secrets): scrub_obj(v, secrets) for k, v in value.items()}
    return value
