"""Volumes through the package: round trips against cryptsetup- and qemu-img-made
volumes (the ciphertext checked with `cryptography`), the file object under Python's own
zipfile and tarfile, and volumes made by sectorcrypt.format accepted by cryptsetup."""

import io
import os
import tarfile
import zipfile

import pytest

import sectorcrypt
from conftest import MIB, PASS, cryptsetup_volume, luks_header_offset, need, run, runs_during, xts


@pytest.mark.parametrize("luks_type,sector_size", [("luks2", 4096), ("luks2", 512), ("luks1", 512)])
def test_cryptsetup_volume_round_trip(tmp_path, xts_key, luks_type, sector_size):
    img = cryptsetup_volume(tmp_path / "c.img", xts_key, luks_type=luks_type,
                            sector_size=sector_size)
    offset = luks_header_offset(img)
    # Ciphertext written as dm-crypt would, read back as plaintext.
    plain = os.urandom(64 * 1024)
    at = 3 * sector_size
    with open(img, "r+b") as f:
        f.seek(offset + at)
        f.write(xts(xts_key, plain, at // sector_size, sector_size, True))
    with sectorcrypt.open(img, PASS) as vol:
        info = vol.info()
        assert info["format"] == luks_type and info["cipher"] == "aes-xts-plain64"
        assert info["sector_size"] == sector_size and info["data_offset"] == offset
        assert info["size"] == vol.size == os.path.getsize(img) - offset
        assert info["keyslot"] == 0 and len(info["uuid"]) == 36
        assert vol.read_at(len(plain), at) == plain
        buf = bytearray(1000)  # unaligned, across sectors
        assert vol.readinto_at(buf, at + 100) == 1000
        assert bytes(buf) == plain[100:1100]
    # Plaintext written through the package, checked as ciphertext on disk.
    new = os.urandom(8 * sector_size)
    with sectorcrypt.open(img, key_file=write_file(tmp_path / "k", PASS), readonly=False) as vol:
        assert vol.write_at(new, 16 * sector_size) == len(new)
    with open(img, "rb") as f:
        f.seek(offset + 16 * sector_size)
        assert f.read(len(new)) == xts(xts_key, new, 16, sector_size, True)


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def qemu_luks(path, size):
    need("qemu-img")
    run("qemu-img", "create", "-q", "-f", "luks", "--object",
        f"secret,id=s,data={PASS.decode()}", "-o", "key-secret=s,iter-time=10", str(path),
        str(size))


def qemu_io(path, command):
    need("qemu-io")
    return run("qemu-io", "--object", f"secret,id=s,data={PASS.decode()}", "--image-opts",
               f"driver=luks,key-secret=s,file.filename={path}", "-c", command).decode()


def test_qemu_img_luks1_both_ways(tmp_path):
    img = tmp_path / "q.img"
    qemu_luks(img, 8 * MIB)
    qemu_io(img, "write -P 0xab 65536 131072")
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        assert vol.info()["format"] == "luks1"
        assert vol.size == 8 * MIB
        assert vol.read_at(131072, 65536) == b"\xab" * 131072
        vol.write_at(b"\xcd" * 70000, 1 * MIB + 123)
    out = qemu_io(img, f"read -P 0xcd {1 * MIB + 123} 70000")
    assert "read 70000/70000" in out
    out = qemu_io(img, "read -P 0xab 65536 131072")
    assert "read 131072/131072" in out


def fast_luks2(path, size=32 * MIB, **kw):
    return sectorcrypt.format(path, PASS, size=size, pbkdf="pbkdf2", iterations=1000, **kw)


def test_zipfile_reads_a_zip_written_into_a_volume(tmp_path):
    img = tmp_path / "z.img"
    fast_luks2(img)
    files = {f"dir/file{i}.bin": os.urandom(10000 * i + 17) for i in range(1, 6)}
    mem = io.BytesIO()
    with zipfile.ZipFile(mem, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    blob = mem.getvalue()
    # The zip ends where the volume ends: zipfile finds its directory from the end.
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        vol.seek(-len(blob), io.SEEK_END)
        assert vol.write(blob) == len(blob)
    with sectorcrypt.open(img, PASS) as vol, zipfile.ZipFile(vol) as z:
        assert sorted(z.namelist()) == sorted(files)
        for name, data in files.items():
            assert z.read(name) == data
        assert z.testzip() is None


def test_tarfile_writes_and_reads_through_the_file_api(tmp_path):
    img = tmp_path / "t.img"
    fast_luks2(img)
    files = {f"f{i}": os.urandom(3000 * i + 1) for i in range(1, 8)}
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        with tarfile.open(fileobj=vol, mode="w") as t:
            for name, data in files.items():
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    with sectorcrypt.open(img, PASS) as vol:
        with tarfile.open(fileobj=io.BufferedReader(vol), mode="r") as t:
            got = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    assert got == files


def test_file_object_basics(tmp_path):
    img = tmp_path / "f.img"
    fast_luks2(img, size=16 * MIB + 64 * 1024)
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        assert vol.readable() and vol.writable() and vol.seekable()
        assert vol.size == 64 * 1024
        assert vol.seek(100) == 100 and vol.tell() == 100
        assert vol.write(b"hello") == 5 and vol.tell() == 105
        assert vol.seek(-5, io.SEEK_CUR) == 100
        assert vol.read(5) == b"hello"
        vol.seek(-3, io.SEEK_END)
        vol.write(b"end")
        vol.seek(-3, io.SEEK_END)
        assert vol.read() == b"end" and vol.read(10) == b""
        # Past the end: a short write, then ENOSPC.
        vol.seek(-2, io.SEEK_END)
        assert vol.write(b"abcd") == 2
        with pytest.raises(OSError) as e:
            vol.write(b"x")
        assert e.value.errno == 28
    assert vol.closed
    with pytest.raises(ValueError):
        vol.read(1)


def test_format_made_volumes_open_in_cryptsetup(tmp_path):
    need("cryptsetup")
    for kind in ("luks2", "luks1"):
        img = tmp_path / f"{kind}.img"
        info = fast_luks2(img, type=kind)
        assert info["format"] == kind
        run("cryptsetup", "open", "--test-passphrase", "--key-file", "-", str(img), stdin=PASS)
        dump = run("cryptsetup", "luksDump", str(img)).decode()
        assert info["uuid"] in dump


def test_format_default_sector_sizes(tmp_path):
    # LUKS2: 4096 when the data area (after 16 MiB) is whole 4096-byte sectors, else 512.
    assert fast_luks2(tmp_path / "a", size=16 * MIB + 65536)["sector_size"] == 4096
    assert fast_luks2(tmp_path / "b", size=16 * MIB + 65536 + 512)["sector_size"] == 512
    assert fast_luks2(tmp_path / "c", size=16 * MIB, type="luks1")["sector_size"] == 512
    # A detached header leaves the whole image to data.
    info = fast_luks2(tmp_path / "d", size=65536, header=tmp_path / "d.hdr")
    assert info["sector_size"] == 4096 and info["data_offset"] == 0
    with sectorcrypt.open(tmp_path / "d", PASS, header=tmp_path / "d.hdr") as vol:
        assert vol.size == 65536


def test_format_with_volume_key_writes_dm_crypt_sectors(tmp_path, xts_key):
    img = tmp_path / "k.img"
    info = fast_luks2(img, volume_key=xts_key, sector_size=4096)
    data = os.urandom(4 * 4096)
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        vol.write_at(data, 8192)
    with open(img, "rb") as f:
        f.seek(info["data_offset"] + 8192)
        assert f.read(len(data)) == xts(xts_key, data, 2, 4096, True)


def test_geli_round_trip(tmp_path):
    img = tmp_path / "g.img"
    info = sectorcrypt.format(img, PASS, type="geli", size=4 * MIB, iterations=1000)
    assert info["format"] == "geli" and info["uuid"] is None
    data = os.urandom(300000)
    with sectorcrypt.open(img, PASS, readonly=False) as vol:
        assert vol.info()["cipher"].startswith("aes-xts")
        vol.write_at(data, 777)
    with sectorcrypt.open(img, PASS) as vol:
        assert vol.read_at(len(data), 777) == data


def test_geli_keyfiles_without_a_passphrase(tmp_path):
    kf = write_file(tmp_path / "kf", os.urandom(256))
    img = tmp_path / "gk.img"
    sectorcrypt.format(img, type="geli", size=2 * MIB, keyfiles=[kf], cipher="aes-cbc",
                       key_size=256)
    with sectorcrypt.open(img, keyfiles=[kf], readonly=False) as vol:
        assert vol.info()["cipher"].startswith("aes-cbc")
        vol.write_at(b"k" * 4096, 8192)
    with sectorcrypt.open(img, keyfiles=[kf]) as vol:
        assert vol.read_at(4096, 8192) == b"k" * 4096
    other = write_file(tmp_path / "other", os.urandom(256))
    with pytest.raises(sectorcrypt.WrongPassphrase):
        sectorcrypt.open(img, keyfiles=[other])


def test_format_veracrypt_with_a_hidden_volume(tmp_path):
    # VeraCrypt's layout: the hidden data ends where the outer data ends, 128 KiB before
    # the end; cryptsetup finds both headers (PIM 1 outside, PIM 2 inside).
    need("cryptsetup")
    img = tmp_path / "vc.img"
    info = sectorcrypt.format(img, PASS, type="veracrypt", size=4 * MIB, pim=1,
                              hidden_size=MIB, hidden_passphrase=b"hidden " + PASS,
                              hidden_pim=2)
    assert info["format"] == "veracrypt"
    assert info["cipher"] == "aes-xts-plain64"
    assert (info["data_offset"], info["size"]) == (131072, 4 * MIB - 2 * 131072)
    outer = run("cryptsetup", "tcryptDump", "--veracrypt", "--veracrypt-pim=1", str(img),
                stdin=PASS).decode()
    assert "MK offset:\t131072" in outer
    hidden = run("cryptsetup", "tcryptDump", "--veracrypt", "--tcrypt-hidden",
                 "--veracrypt-pim=2", str(img), stdin=b"hidden " + PASS).decode()
    assert f"MK offset:\t{4 * MIB - 131072 - MIB}" in hidden
    # A hidden volume that does not fit is refused, and the image keeps its bytes.
    before = img.read_bytes()
    with pytest.raises(sectorcrypt.InvalidArgument, match="does not fit"):
        sectorcrypt.format(img, PASS, type="veracrypt", pim=1, hidden_size=4 * MIB,
                           hidden_passphrase=b"other")
    with pytest.raises(sectorcrypt.InvalidArgument, match="hidden_size"):
        sectorcrypt.format(img, PASS, type="veracrypt", hidden_passphrase=b"other")
    assert img.read_bytes() == before


TCRYPT_IMAGES = (os.path.dirname(__file__)
                 + "/../../volume/tests/data/tcrypt/tcrypt-images.tar.xz")


def tcrypt_fixture(tmp_path, name):
    """One image of cryptsetup's TCRYPT fixtures (the tarball committed for the volume
    tests), extracted into ``tmp_path``."""
    with tarfile.open(TCRYPT_IMAGES) as t:
        member = t.getmember(f"tcrypt-images/{name}")
        path = tmp_path / name
        path.write_bytes(t.extractfile(member).read())
    return path


def fat_serial(boot_sector):
    """The volume serial of a FAT boot sector (FAT12/16 at byte 39, FAT32 at 67)."""
    for at in (39, 67):
        serial = int.from_bytes(boot_sector[at:at + 4], "little")
        if serial in (0xDEADBABE, 0xCAFEBABE):
            return serial
    return None


def test_open_veracrypt_volumes_by_name(tmp_path):
    # VeraCrypt volumes have no signature: named, with cryptsetup's options. The fixtures
    # (VeraCrypt-made, from cryptsetup's tests) hold FAT file systems of known serials.
    outer = tcrypt_fixture(tmp_path, "vc_1-sha512-xts-aes-hidden")
    with pytest.raises(sectorcrypt.NoHeader):
        sectorcrypt.open(outer, "aaaaaaaaaaaa")
    # Each KDF tried costs its full iterations: the hash narrows them, as cryptsetup's.
    with sectorcrypt.open(outer, "aaaaaaaaaaaa", type="veracrypt", hash="sha512") as vol:
        assert fat_serial(vol.read_at(512, 0)) == 0xDEADBABE
    with sectorcrypt.open(outer, "bbbbbbbbbbbb", type="veracrypt", hash="sha512",
                          tcrypt_hidden=True) as vol:
        assert fat_serial(vol.read_at(512, 0)) == 0xCAFEBABE
    with pytest.raises(sectorcrypt.WrongPassphrase):
        sectorcrypt.open(outer, "aaaaaaaaaaaa", type="veracrypt", hash="sha256")
    pim = tcrypt_fixture(tmp_path, "vcpim_1_1234-sha256-xts-aes")
    with sectorcrypt.open(pim, "cccccccccccccccccccc", type="veracrypt", hash="sha256",
                          cipher="aes", veracrypt_pim=1234) as vol:
        assert fat_serial(vol.read_at(512, 0)) == 0xDEADBABE
    with pytest.raises(sectorcrypt.WrongPassphrase):
        sectorcrypt.open(pim, "cccccccccccccccccccc", type="veracrypt", hash="sha256",
                         veracrypt_pim=1233)
    # Keywords that need a type, or each other.
    with pytest.raises(sectorcrypt.InvalidArgument, match="type="):
        sectorcrypt.open(pim, "cccccccccccccccccccc", veracrypt_pim=1234)
    with pytest.raises(sectorcrypt.InvalidArgument, match="go with protect_hidden"):
        sectorcrypt.open(pim, "cccccccccccccccccccc", type="veracrypt", protect_hidden_pim=2)
    with pytest.raises(sectorcrypt.InvalidArgument, match="name only"):
        sectorcrypt.open(pim, "cccccccccccccccccccc", type="luks2")


def test_open_veracrypt_outer_volume_with_its_hidden_volume_protected(tmp_path):
    img = tmp_path / "vc.img"
    hidden_pass = b"hidden " + PASS
    sectorcrypt.format(img, PASS, type="veracrypt", size=4 * MIB, pim=1,
                       hidden_size=MIB, hidden_passphrase=hidden_pass, hidden_pim=2)
    with sectorcrypt.open(img, hidden_pass, type="veracrypt", veracrypt_pim=2,
                          tcrypt_hidden=True, readonly=False) as vol:
        vol.write_at(b"h" * 8192, 0)
    # The hidden data ends where the outer data ends.
    outer_size = 4 * MIB - 2 * 131072
    hidden_start = outer_size - MIB
    with sectorcrypt.open(img, PASS, type="veracrypt", veracrypt_pim=1, readonly=False,
                          protect_hidden=hidden_pass, protect_hidden_pim=2) as vol:
        vol.write_at(b"o" * 4096, 0)
        # A write that reaches into the hidden data is refused whole (EACCES).
        with pytest.raises(PermissionError, match="protected hidden volume"):
            vol.write_at(b"x" * 8192, hidden_start - 4096)
        vol.flush()
    with sectorcrypt.open(img, PASS, type="veracrypt", veracrypt_pim=1) as vol:
        assert vol.read_at(4096, 0) == b"o" * 4096
        assert vol.read_at(4096, hidden_start - 4096) != b"x" * 4096
    with sectorcrypt.open(img, hidden_pass, type="veracrypt", veracrypt_pim=2,
                          tcrypt_hidden=True) as vol:
        assert vol.read_at(8192, 0) == b"h" * 8192
    # The wrong secret for the hidden volume: refused, nothing opened.
    with pytest.raises(sectorcrypt.Error):
        sectorcrypt.open(img, PASS, type="veracrypt", veracrypt_pim=1, readonly=False,
                         protect_hidden=b"not it", protect_hidden_pim=2)


def test_gil_released_during_a_read(tmp_path):
    img = tmp_path / "r.img"
    fast_luks2(img, size=16 * MIB + 256 * MIB)
    buf = bytearray(256 * MIB)
    with sectorcrypt.open(img, PASS) as vol:
        start, elapsed, stamps = runs_during(lambda: vol.readinto_at(buf, 0))
    middle = [t for t in stamps if start + elapsed / 4 < t < start + 3 * elapsed / 4]
    assert elapsed > 0.02, f"the read took only {elapsed:.3f}s: too short to tell"
    assert middle, f"no other thread ran during the {elapsed:.3f}s read"

