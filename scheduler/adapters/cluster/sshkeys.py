"""The ssh plugin's key pair, made when the reconcile creates the job's Secret on the cluster.

jobspec.job_plugins builds the Secret with placeholders where the keys go (so the database,
the render and the desired objects the cycle compares hold no key); `with_key_pair` fills them
in just before the create request, and the key lives nowhere else in the portal. Same keys as
upstream's generateRsaKey (volcano-sh/volcano pkg/controllers/job/plugins/ssh/ssh.go:202-233):
RSA 2048, the private key as a PKCS#1 PEM block ("RSA PRIVATE KEY"), the public key in
authorized_keys form ("ssh-rsa AAAA...\\n") as both `id_rsa.pub` and `authorized_keys`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from jobspec.job_plugins import SSH_AUTHORIZED_KEYS, SSH_PRIVATE_KEY, SSH_PUBLIC_KEY

KEY_BITS = 2048  # ssh.go:203


def key_pair() -> tuple[str, str]:
    """(private key PEM, public key line) of a fresh RSA key pair."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # PKCS#1, as x509.MarshalPKCS1PrivateKey
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private.decode(), public.decode() + "\n"


def with_key_pair(secret: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the ssh plugin's Secret (wire shape) with a fresh key pair in place of its
    placeholders; its other keys (the ssh config) as they are."""
    private, public = key_pair()
    data = {
        **(secret.get("stringData") or {}),
        SSH_PRIVATE_KEY: private,
        SSH_PUBLIC_KEY: public,
        SSH_AUTHORIZED_KEYS: public,
    }
    return {**secret, "stringData": data}
