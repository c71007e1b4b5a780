"""SectorCipher against the `cryptography` package (dm-crypt's sector formulas), in place
over every kind of writable buffer, with the GIL released while it runs."""

import array
import os
import threading
import time

import pytest

import sectorcrypt
from conftest import cbc_essiv, runs_during, xts


@pytest.mark.parametrize("sector_size,large_iv", [(512, False), (4096, False), (4096, True)])
def test_xts_matches_cryptography(xts_key, sector_size, large_iv):
    c = sectorcrypt.SectorCipher("aes-xts-plain64", xts_key)
    plain = os.urandom(8 * sector_size)
    buf = bytearray(plain)
    c.encrypt(buf, 1000, sector_size, iv_large_sectors=large_iv)
    assert bytes(buf) == xts(xts_key, plain, 1000, sector_size, True, large_iv)
    c.decrypt(buf, 1000, sector_size, iv_large_sectors=large_iv)
    assert bytes(buf) == plain


def test_xts_256_bit_key_and_high_sector_numbers():
    key = os.urandom(32)
    c = sectorcrypt.SectorCipher("aes-xts-plain64", key)
    plain = os.urandom(4 * 512)
    buf = bytearray(plain)
    first = (1 << 40) + 3
    c.encrypt(buf, first)
    assert bytes(buf) == xts(key, plain, first, 512, True)


def test_cbc_essiv_matches_cryptography():
    key = os.urandom(32)
    c = sectorcrypt.SectorCipher("aes-cbc-essiv:sha256", key)
    plain = os.urandom(6 * 512)
    buf = bytearray(plain)
    c.encrypt(buf, 77)
    assert bytes(buf) == cbc_essiv(key, plain, 77, 512, True)
    c.decrypt(buf, 77)
    assert bytes(buf) == plain


def test_in_place_over_memoryview_array_and_numpy(xts_key):
    c = sectorcrypt.SectorCipher("aes-xts-plain64", xts_key)
    plain = os.urandom(4096)
    want = xts(xts_key, plain, 5, 512, True)
    # A slice of a larger bytearray, through a memoryview: only that part changes.
    outer = bytearray(b"\xee" * 512 + plain + b"\xee" * 512)
    c.encrypt(memoryview(outer)[512:512 + 4096], 5)
    assert outer[:512] == b"\xee" * 512 and outer[-512:] == b"\xee" * 512
    assert bytes(outer[512:512 + 4096]) == want
    # An array of another item type: the bytes are what counts.
    words = array.array("I", plain)
    c.encrypt(words, 5)
    assert words.tobytes() == want
    np = pytest.importorskip("numpy", reason="numpy is not installed in the test venv")
    a = np.frombuffer(plain, dtype=np.uint64).copy()
    c.encrypt(a, 5)
    assert a.tobytes() == want
    c.decrypt(a, 5)
    assert a.tobytes() == plain


def test_refusals(xts_key):
    with pytest.raises(sectorcrypt.InvalidArgument, match="cipher"):
        sectorcrypt.SectorCipher("aes-xts-whatever", xts_key)
    with pytest.raises(sectorcrypt.InvalidArgument):
        sectorcrypt.SectorCipher("aes-xts-plain64", b"short")
    with pytest.raises(sectorcrypt.InvalidArgument):
        sectorcrypt.SectorCipher("aes-xts-plain64", b"\x01" * 64)  # equal halves
    c = sectorcrypt.SectorCipher("aes-xts-plain64", xts_key)
    with pytest.raises(TypeError, match="writable"):
        c.encrypt(b"\0" * 512)  # bytes cannot be changed in place
    with pytest.raises(sectorcrypt.InvalidArgument, match="whole number of sectors"):
        c.encrypt(bytearray(700))
    with pytest.raises(sectorcrypt.InvalidArgument):
        c.encrypt(bytearray(1000), 0, 1000)  # not a sector size
    with pytest.raises(TypeError):
        c.encrypt("text")


def test_key_not_in_repr():
    key = bytes.fromhex("5a" * 31 + "a5" * 33)
    c = sectorcrypt.SectorCipher("aes-xts-plain64", key)
    text = repr(c) + str(c)
    assert "512-bit" in text
    assert "5a5a" not in text.lower() and "ZZZZ" not in text


def test_gil_released_while_encrypting(xts_key):
    """A Python thread runs while a long encryption runs in another."""
    c = sectorcrypt.SectorCipher("aes-xts-plain64", xts_key)
    buf = bytearray(512 << 20)
    start, elapsed, stamps = runs_during(lambda: c.encrypt(buf))
    # With the GIL held, the other thread could run only at the edges of the call.
    middle = [t for t in stamps if start + elapsed / 4 < t < start + 3 * elapsed / 4]
    assert elapsed > 0.02, f"the encryption took only {elapsed:.3f}s: too short to tell"
    assert middle, f"no other thread ran during the {elapsed:.3f}s call"


def test_two_threads_at_once(xts_key):
    c = sectorcrypt.SectorCipher("aes-xts-plain64", xts_key)
    plain = os.urandom(1 << 20)
    bufs = [bytearray(plain) for _ in range(4)]
    threads = [threading.Thread(target=c.encrypt, args=(b, 9)) for b in bufs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = xts(xts_key, plain[:4096], 9, 512, True)
    assert all(bytes(b[:4096]) == want for b in bufs)
    assert len({bytes(b) for b in bufs}) == 1
