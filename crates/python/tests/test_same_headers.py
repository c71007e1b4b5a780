"""`sectorcrypt.format` and the command line's `sectorcrypt format` make the same headers
from the same options: both call the image library's one creator. The random fields
(salts, digests, UUIDs, the keyslot area's encrypted keys, GELI's encrypted master keys
and the checksums over them) differ, and are masked; every other byte of the LUKS binary
headers, every other value of the LUKS2 JSON metadata, and every GELI metadata field but
the salt, keys and hash must be equal. Each volume must then open with the other front
end, and the LUKS ones with cryptsetup.

The command line is the one `run-tests.sh` built (SECTORCRYPT_CLI); without it the test
skips (and fails under SECTORCRYPT_STRICT=1)."""

import json
import os
import struct
import subprocess

import pytest

import sectorcrypt
from conftest import MIB, PASS, need, run

FAST_LUKS2 = dict(pbkdf="argon2id", iterations=4, pbkdf_memory=32768, pbkdf_parallel=1)
FAST_PBKDF2 = dict(pbkdf="pbkdf2", iterations=1000)


def cli():
    exe = os.environ.get("SECTORCRYPT_CLI")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("the sectorcrypt command is not built (run-tests.sh sets SECTORCRYPT_CLI)")
    return exe


def flags(kw):
    """The command line's flags for the keyword options `kw`."""
    names = {"type": "--type", "cipher": "--cipher", "key_size": "--key-size",
             "sector_size": "--sector-size", "pbkdf": "--pbkdf", "hash": "--hash",
             "iterations": "--pbkdf-force-iterations", "pbkdf_memory": "--pbkdf-memory",
             "pbkdf_parallel": "--pbkdf-parallel", "label": "--label",
             "integrity": "--integrity"}
    out = []
    for k, v in kw.items():
        out += [names[k], str(v)]
    return out


def both(tmp_path, size, **kw):
    """The same volume made by each front end: (by the command line, by Python)."""
    exe = cli()
    passfile = tmp_path / "pass"
    passfile.write_bytes(PASS)
    by_cli, by_py = tmp_path / "cli.img", tmp_path / "py.img"
    run(exe, "format", str(by_cli), "--size", str(size), "--key-file", str(passfile),
        *flags(kw))
    sectorcrypt.format(by_py, PASS, size=size, **kw)
    return by_cli, by_py


def luks2_masked(path):
    """The LUKS2 headers of `path` (both copies) with their random fields masked: the
    binary header's salt, UUID and checksum; the JSON's salts and digests; the keyslot
    area itself is left out."""
    raw = open(path, "rb").read(4 * MIB)
    hdr_size = struct.unpack(">Q", raw[8:16])[0]
    copies = []
    for at in (0, hdr_size):
        b = bytearray(raw[at:at + 4096])
        b[104:168] = bytes(64)      # salt
        b[168:208] = bytes(40)      # uuid
        b[448:512] = bytes(64)      # checksum
        meta = json.loads(raw[at + 4096:at + hdr_size].rstrip(b"\0"))
        for ks in meta["keyslots"].values():
            ks["kdf"].pop("salt", None)
        for d in meta["digests"].values():
            for k in ("salt", "digest"):
                d.pop(k)
        copies.append((bytes(b), meta))
    return copies


def luks1_masked(path):
    """The LUKS1 header of `path` (592 bytes) with the master key digest and its salt,
    the UUID and each keyslot's salt masked."""
    b = bytearray(open(path, "rb").read(592))
    b[112:164] = bytes(52)          # mk digest (20), salt (32)
    b[168:208] = bytes(40)          # uuid
    for slot in range(8):
        at = 208 + 48 * slot
        b[at + 8:at + 40] = bytes(32)  # keyslot salt
    return bytes(b)


def geli_fields(path):
    """GELI's metadata fields before its salt (magic to iterations, 47 bytes of the last
    sector)."""
    with open(path, "rb") as f:
        f.seek(-512, os.SEEK_END)
        return f.read(47)


def opens_everywhere(exe, by_cli, by_py, passfile, cryptsetup):
    with sectorcrypt.open(by_cli, PASS) as vol:
        assert vol.read_at(4096, 0) is not None
    out = run(exe, "test-key", str(by_py), "--key-file", str(passfile))
    assert b"opens" in out
    if cryptsetup:
        for img in (by_cli, by_py):
            run("cryptsetup", "open", "--test-passphrase", "--key-file", str(passfile),
                str(img))


@pytest.mark.parametrize("kw", [
    dict(type="luks2", label="same", **FAST_LUKS2),
    dict(type="luks2", cipher="aes-cbc-essiv:sha256", sector_size=512, hash="sha512",
         **FAST_PBKDF2),
])
def test_luks2_headers_match(tmp_path, kw):
    need("cryptsetup")
    by_cli, by_py = both(tmp_path, 20 * MIB, **kw)
    a, b = luks2_masked(by_cli), luks2_masked(by_py)
    assert a == b
    # Not vacuous: the masked values do differ, and the label is there.
    assert open(by_cli, "rb").read(512) != open(by_py, "rb").read(512)
    assert a[0][1]["segments"]["0"]["encryption"] == kw.get("cipher", "aes-xts-plain64")
    opens_everywhere(cli(), by_cli, by_py, tmp_path / "pass", cryptsetup=True)


def test_luks1_headers_match(tmp_path):
    need("cryptsetup")
    by_cli, by_py = both(tmp_path, 4 * MIB, type="luks1", key_size=256, **FAST_PBKDF2)
    a, b = luks1_masked(by_cli), luks1_masked(by_py)
    assert a == b
    assert a[:6] == b"LUKS\xba\xbe"
    assert open(by_cli, "rb").read(592) != open(by_py, "rb").read(592)
    opens_everywhere(cli(), by_cli, by_py, tmp_path / "pass", cryptsetup=True)


def test_geli_metadata_matches(tmp_path):
    by_cli, by_py = both(tmp_path, 4 * MIB, type="geli", cipher="aes-cbc", key_size=256,
                         sector_size=4096, integrity="hmac-sha256", iterations=1000)
    a, b = geli_fields(by_cli), geli_fields(by_py)
    assert a == b
    assert a.startswith(b"GEOM::ELI")
    # ealgo AES-CBC (11), keylen 256, aalgo HMAC/SHA256 (18), sectors of 4096, 1000
    # iterations
    ealgo, keylen, aalgo = struct.unpack("<HHH", a[24:30])
    assert (ealgo, keylen, aalgo) == (11, 256, 18)
    assert struct.unpack("<I", a[38:42])[0] == 4096
    assert struct.unpack("<I", a[43:47])[0] == 1000
    opens_everywhere(cli(), by_cli, by_py, tmp_path / "pass", cryptsetup=False)
