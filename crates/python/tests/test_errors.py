"""Each exception, read-only volumes refusing writes, and secrets kept out of messages."""

import errno
import io
import os

import pytest

import sectorcrypt
from conftest import MIB, PASS


def fast(path, **kw):
    kw.setdefault("size", 17 * MIB)
    return sectorcrypt.format(path, PASS, pbkdf="pbkdf2", iterations=1000, **kw)


def test_wrong_passphrase(tmp_path):
    img = tmp_path / "w.img"
    fast(img)
    with pytest.raises(sectorcrypt.WrongPassphrase) as e:
        sectorcrypt.open(img, "not the passphrase")
    assert isinstance(e.value, sectorcrypt.Error)
    assert "not the passphrase" not in str(e.value)
    # The image is not left claimed: the right passphrase opens it.
    sectorcrypt.open(img, PASS).close()


def test_corrupt_header(tmp_path):
    img = tmp_path / "c.img"
    with open(img, "wb") as f:
        f.write(os.urandom(4 * MIB))
    with pytest.raises(sectorcrypt.CorruptHeader, match="not a volume of a known format"):
        sectorcrypt.open(img, PASS)
    # Both copies of a LUKS2 header, their JSON damaged: no checksum verifies.
    good = tmp_path / "g.img"
    fast(good)
    with open(good, "r+b") as f:
        for copy in (0, 16384):
            f.seek(copy + 4096 + 10)
            f.write(b"#")
    with pytest.raises(sectorcrypt.CorruptHeader):
        sectorcrypt.open(good, PASS)


def test_os_errors_carry_errno(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        sectorcrypt.open(tmp_path / "missing.img", PASS)
    assert e.value.errno == errno.ENOENT
    with pytest.raises(FileNotFoundError):
        sectorcrypt.open(tmp_path / "missing.img", key_file=tmp_path / "no-key")
    # A directory is no image.
    with pytest.raises(OSError):
        sectorcrypt.open(tmp_path, PASS, readonly=False)


def test_authentication_error_on_a_tampered_geli_sector(tmp_path):
    img = tmp_path / "a.img"
    info = sectorcrypt.format(img, PASS, type="geli", integrity="hmac-sha256", size=2 * MIB,
                              iterations=1000)
    assert info["format"] == "geli"
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        vol.write_at(b"\x42" * 65536, 0)
    with open(img, "r+b") as f:
        f.seek(20000)
        b = f.read(1)
        f.seek(20000)
        f.write(bytes([b[0] ^ 1]))
    with sectorcrypt.open(img, PASS) as vol:
        with pytest.raises(sectorcrypt.AuthenticationError, match="authentication failed"):
            vol.read_at(65536, 0)
        buf = bytearray(65536)
        with pytest.raises(sectorcrypt.AuthenticationError):
            vol.readinto(buf)
        # Sectors away from the damage still read.
        assert vol.read_at(512, 900 * 1024) == b"\0" * 512
        # At and past the end: nothing, as a file.
        assert vol.read_at(512, vol.size) == b""
        assert vol.readinto_at(bytearray(512), vol.size + 4096) == 0


def test_readonly_refuses_writes(tmp_path):
    img = tmp_path / "r.img"
    fast(img)
    before = open(img, "rb").read()
    with sectorcrypt.open(img, PASS) as vol:
        assert not vol.writable()
        with pytest.raises(io.UnsupportedOperation):
            vol.write(b"x")
        with pytest.raises(io.UnsupportedOperation):
            vol.write_at(b"x" * 512, 0)
    assert open(img, "rb").read() == before


def test_invalid_arguments(tmp_path):
    img = tmp_path / "i.img"
    with pytest.raises(sectorcrypt.InvalidArgument, match="give a size"):
        sectorcrypt.format(img, PASS)
    assert not img.exists()
    with pytest.raises(sectorcrypt.InvalidArgument, match="not both"):
        sectorcrypt.open(img, PASS, key_file=img)
    with pytest.raises(sectorcrypt.InvalidArgument, match="luks2, luks1, geli or veracrypt"):
        sectorcrypt.format(img, PASS, size=MIB, type="bitlocker")
    # A failed format removes the image it created.
    with pytest.raises(sectorcrypt.Error):
        fast(img, sector_size=1000)
    assert not img.exists()
    with pytest.raises(sectorcrypt.Unsupported):
        fast(img, cipher="aes-ecb")
    assert not img.exists()


def test_format_refuses_an_image_in_use(tmp_path):
    img = tmp_path / "u.img"
    fast(img)
    with sectorcrypt.open(img, PASS):
        with pytest.raises(sectorcrypt.InUse, match="in use"):
            fast(img)
    # Once closed, it can be formatted again, and the old passphrase is gone.
    sectorcrypt.format(img, "another", pbkdf="pbkdf2", iterations=1000)
    with pytest.raises(sectorcrypt.WrongPassphrase):
        sectorcrypt.open(img, PASS)


def test_secrets_not_in_reprs(tmp_path):
    img = tmp_path / "s.img"
    fast(img)
    with sectorcrypt.open(img, PASS) as vol:
        text = repr(vol) + str(vol.info()) + repr(vol._native)
        assert "key" not in str(vol.info()).replace("keyslot", "")
    assert PASS.decode() not in text


def test_one_writer_at_a_time_and_readers_beside_it_only_when_shared(tmp_path):
    # Two opens in one process are two open file descriptions, claimed as two processes.
    img = tmp_path / "c.img"
    fast(img)
    me = f"PID {os.getpid()} ("
    with sectorcrypt.open(img, PASS, readonly=False):
        with pytest.raises(sectorcrypt.InUse, match="second writer") as e:
            sectorcrypt.open(img, PASS, readonly=False)
        assert me in str(e.value)
        with pytest.raises(sectorcrypt.InUse, match="--shared") as e:
            sectorcrypt.open(img, PASS)
        assert me in str(e.value)
        with sectorcrypt.open(img, PASS, shared=True) as vol:
            assert vol.readonly
    # Readers share, and keep a writer out until they close.
    with sectorcrypt.open(img, PASS), sectorcrypt.open(img, PASS):
        with pytest.raises(sectorcrypt.InUse, match="open read-only by a reader"):
            sectorcrypt.open(img, PASS, readonly=False)
    sectorcrypt.open(img, PASS, readonly=False).close()


def test_a_detached_header_alone_is_refused_before_its_data_is_touched(tmp_path):
    # A detached header's data offset is 0: its own file, opened as the image, would have
    # its keyslots overwritten by the first write to the data.
    data, hdr = tmp_path / "d.img", tmp_path / "d.hdr"
    sectorcrypt.format(data, PASS, size=MIB, header=hdr, pbkdf="pbkdf2", iterations=1000)
    before = open(hdr, "rb").read()
    with pytest.raises(sectorcrypt.InvalidArgument, match="holds a detached header"):
        sectorcrypt.open(hdr, PASS, readonly=False)
    assert open(hdr, "rb").read() == before
    with sectorcrypt.open(data, PASS, header=hdr, readonly=False) as vol:
        assert vol.info()["data_offset"] == 0
