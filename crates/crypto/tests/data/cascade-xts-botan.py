#!/usr/bin/python3
# Makes the XTS vectors of crates/crypto/tests/cascade.rs with Botan 2 (Debian's
# python3-botan, installed by scripts/deps.sh), an implementation independent of the
# RustCrypto crates the cascade uses. Run: /usr/bin/python3 cascade-xts-botan.py
# Prints, per case: name, the SHA-256 of the ciphertext, its first 32 bytes (hex).
import hashlib
import botan2 as b

KEY = bytes((i * 37 + 11) & 0xFF for i in range(64 * 3))
PLAIN = bytes((i * 7 + 3) & 0xFF for i in range(1024))
UNIT = 0x123456789A


def xts(cipher, key, unit, data):
    """Botan's XTS over 512-byte data units numbered from `unit`."""
    out = b""
    for i in range(0, len(data), 512):
        x = b.SymmetricCipher(cipher + "/XTS", encrypt=True)
        x.set_key(key)
        x.start((unit + i // 512).to_bytes(16, "little"))
        out += x.finish(data[i : i + 512])
    return out


def chain(ciphers):
    """A cascade: layer i's keys at 32*i (primary) and 32*n + 32*i (secondary)."""
    n = len(ciphers)
    data = PLAIN
    for i, c in enumerate(ciphers):
        k = KEY[32 * i : 32 * i + 32] + KEY[32 * n + 32 * i : 32 * n + 32 * i + 32]
        data = xts(c, k, UNIT, data)
    return data


for name, ciphers in [
    ("serpent", ["Serpent"]),
    ("twofish", ["Twofish"]),
    ("camellia", ["Camellia-256"]),
    ("aes", ["AES-256"]),
    ("serpent-twofish-aes", ["Serpent", "Twofish", "AES-256"]),
    ("aes-twofish-serpent", ["AES-256", "Twofish", "Serpent"]),
    ("serpent-camellia", ["Serpent", "Camellia-256"]),
]:
    ct = chain(ciphers)
    print(name, hashlib.sha256(ct).hexdigest(), ct[:32].hex())
