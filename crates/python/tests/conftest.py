"""Shared helpers of the package's tests: the external tools (skipped with a printed
reason where missing; under SECTORCRYPT_STRICT=1, as CI runs them, every skip is a failure
with the same reason), volumes made by cryptsetup and qemu-img with fast key derivation,
and dm-crypt's sector formula computed with the `cryptography` package."""

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

PASS = b"correct horse battery staple"
# CI installs every tool the tests use (scripts/deps.sh) and sets this: a test that would
# skip fails instead, so that no interoperability test passes without having run.
STRICT = os.environ.get("SECTORCRYPT_STRICT") == "1"
MIB = 1 << 20


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under SECTORCRYPT_STRICT=1 a skipped test (any `pytest.skip`, `importorskip` or skip
    mark) is reported as failed, with its reason."""
    report = (yield).get_result()
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"{reason} (SECTORCRYPT_STRICT=1: a missing tool or capability is a failure)"
        )


def need(tool):
    """Skips the test, saying why, when `tool` is not on PATH."""
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (scripts/deps.sh installs it)")


def run(*cmd, stdin=None):
    """Runs `cmd`; fails the test with its output when it fails."""
    p = subprocess.run(cmd, input=stdin, capture_output=True)
    if p.returncode != 0:
        pytest.fail(f"{cmd[0]} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout


def sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def luks_header_offset(path):
    """The data offset in bytes of the LUKS volume in `path`, from cryptsetup."""
    out = run("cryptsetup", "luksDump", str(path)).decode()
    for line in out.splitlines():
        words = line.split()
        if line.startswith("Payload offset:"):  # LUKS1, in 512-byte sectors
            return int(words[-1]) * 512
        if words[:1] == ["offset:"] and "[bytes]" in line:  # LUKS2 segment
            return int(words[1])
    raise AssertionError(f"no data offset in luksDump of {path}:\n{out}")


def cryptsetup_volume(path, key, *, size=24 * MIB, luks_type="luks2", sector_size=512,
                      cipher="aes-xts-plain64"):
    """A volume made by cryptsetup with volume key `key` and passphrase PASS."""
    need("cryptsetup")
    sparse(path, size)
    keyfile = f"{path}.vk"
    with open(keyfile, "wb") as f:
        f.write(key)
    args = ["cryptsetup", "luksFormat", "-q", "--type", luks_type, "--cipher", cipher,
            "--key-size", str(len(key) * 8), "--volume-key-file", keyfile,
            "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", "-"]
    if luks_type == "luks2":
        args += ["--sector-size", str(sector_size)]
    run(*args, str(path), stdin=PASS)
    os.unlink(keyfile)
    return path


def xts(key, data, first_sector, sector_size, encrypt, large_iv=False):
    """dm-crypt's aes-xts-plain64 over whole sectors, computed with `cryptography`: the
    tweak of each sector is its IV number, 64-bit little-endian, zero-padded; the number
    counts 512-byte units unless `large_iv`."""
    step = 1 if large_iv else sector_size // 512
    out = bytearray()
    for i in range(len(data) // sector_size):
        tweak = ((first_sector + i) * step).to_bytes(16, "little")
        c = Cipher(algorithms.AES(key), modes.XTS(tweak))
        op = c.encryptor() if encrypt else c.decryptor()
        out += op.update(data[i * sector_size:(i + 1) * sector_size]) + op.finalize()
    return bytes(out)


def cbc_essiv(key, data, first_sector, sector_size, encrypt):
    """dm-crypt's aes-cbc-essiv:sha256 (512-byte IV units): each sector's IV is its IV
    number, encrypted with AES-256 under SHA-256(key)."""
    salt = hashlib.sha256(key).digest()
    out = bytearray()
    for i in range(len(data) // sector_size):
        n = ((first_sector + i) * (sector_size // 512)).to_bytes(16, "little")
        e = Cipher(algorithms.AES(salt), modes.ECB()).encryptor()
        iv = e.update(n) + e.finalize()
        c = Cipher(algorithms.AES(key), modes.CBC(iv))
        op = c.encryptor() if encrypt else c.decryptor()
        out += op.update(data[i * sector_size:(i + 1) * sector_size]) + op.finalize()
    return bytes(out)


def pattern(n, seed=0):
    """`n` bytes that differ from sector to sector."""
    return bytes((i * 7 + (i >> 9) * 13 + seed) & 0xFF for i in range(n))


def runs_during(call):
    """Runs `call` while another Python thread notes the time every millisecond or so;
    returns when the call started, how long it took, and the times noted. A call that
    holds the GIL leaves no note inside it (the switch interval is set to 1 ms)."""
    stamps = []
    stop = threading.Event()

    def note():
        last = 0.0
        while not stop.is_set():
            t = time.perf_counter()
            if t - last > 0.001:
                stamps.append(t)
                last = t

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    t = threading.Thread(target=note)
    t.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        call()
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    return start, elapsed, stamps


@pytest.fixture
def xts_key():
    return bytes(range(1, 65))
