"""The secret of an API token, and the two digests stored instead of secrets.

A secret is `gpq_` + 32 random bytes (URL-safe base64): 256 bits, so one SHA-256 of it is
enough to store (nothing to guess offline; a slow password hash would only slow down every
request). The database keeps the digest and the first characters, which tell a user's
tokens apart on the token page without being usable.
"""

import hashlib
import secrets

SECRET_PREFIX = "gpq_"  # noqa: S105 - a message, not a secret
SHOWN_CHARACTERS = 12


def secret_new() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_prefix(secret: str) -> str:
    return secret[:SHOWN_CHARACTERS]


def password_fingerprint(password_hash: str) -> str:
    """Changes whenever the user's password does, by whatever path it was changed (the admin,
    `changepassword`, a bulk update): a token remembers the one of its creation."""
    return hashlib.sha256(password_hash.encode("utf-8", "surrogatepass")).hexdigest()
