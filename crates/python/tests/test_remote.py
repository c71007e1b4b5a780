"""Volumes on remote stores: ``sectorcrypt.open`` takes the NBD URI that ``sectorcrypt
read`` takes, for a LUKS2 volume cryptsetup made, served by nbdkit over a Unix socket and
over TCP on 127.0.0.1. What it reads is dm-crypt's ciphertext decrypted; what it writes
lands in the image file as dm-crypt's formula says. An export nobody serves is
``Unreachable`` (a ``ConnectionError``), a second writer ``InUse``."""

import os
import socket
import subprocess
import time

import pytest

import sectorcrypt
from conftest import MIB, PASS, cryptsetup_volume, luks_header_offset, need, pattern, xts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nbdkit:
    """``nbdkit -f file IMAGE`` on a Unix socket or a loopback TCP port, waited for until
    its pid file appears (it listens then); killed on exit."""

    def __init__(self, image, tmp, tcp):
        need("nbdkit")
        pidfile = tmp / f"nbdkit-{'tcp' if tcp else 'unix'}.pid"
        args = ["nbdkit", "-f", "--exit-with-parent", "-P", str(pidfile)]
        if tcp:
            self.port = free_port()
            args += ["-i", "127.0.0.1", "-p", str(self.port)]
            self.uri = f"nbd://127.0.0.1:{self.port}/"
        else:
            sock = tmp / "kit.sock"
            args += ["-U", str(sock)]
            self.uri = f"nbd+unix:///?socket={sock}"
        self.proc = subprocess.Popen(args + ["file", f"file={image}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.stat().st_size > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(f"nbdkit did not start for {self.uri}")
            time.sleep(0.01)

    def close(self):
        self.proc.kill()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.mark.parametrize("tcp", [False, True], ids=["unix", "tcp"])
def test_open_read_and_write_through_an_nbd_export(tmp_path, xts_key, tcp):
    img = cryptsetup_volume(tmp_path / "v.img", xts_key, size=24 * MIB)
    offset = luks_header_offset(img)
    plain = pattern(64 * 1024, 5)
    at = 3 * 4096
    with open(img, "r+b") as f:
        f.seek(offset + at)
        f.write(xts(xts_key, plain, at // 512, 512, True))
    new = pattern(4096, 9)
    with Nbdkit(img, tmp_path, tcp) as kit:
        with sectorcrypt.open(kit.uri, PASS, readonly=False, connections=2, timeout=10,
                              retry=1, threads=2) as vol:
            info = vol.info()
            assert info["format"] == "luks2" and info["data_offset"] == offset
            assert vol.size == 24 * MIB - offset
            assert vol.name == kit.uri
            assert vol.read_at(len(plain), at) == plain
            assert vol.write_at(new, 8 * 512) == len(new)
            # One writer per export in this process.
            with pytest.raises(sectorcrypt.InUse, match="second writer"):
                sectorcrypt.open(kit.uri, PASS, readonly=False)
            vol.flush()
        with pytest.raises(sectorcrypt.WrongPassphrase):
            sectorcrypt.open(kit.uri, b"not it")
    with open(img, "rb") as f:
        f.seek(offset + 8 * 512)
        assert f.read(len(new)) == xts(xts_key, new, 8, 512, True)


def test_an_export_nobody_serves_is_unreachable(tmp_path):
    with pytest.raises(sectorcrypt.Unreachable) as e:
        sectorcrypt.open(f"nbd+unix:///?socket={tmp_path}/nobody.sock", PASS)
    assert isinstance(e.value, ConnectionError)
    assert e.value.errno is not None
    with pytest.raises(sectorcrypt.InvalidArgument):
        sectorcrypt.open("nbd://127.0.0.1:notaport/", PASS)


def test_secrets_in_a_locator_stay_out_of_messages(tmp_path):
    # A parameter the client does not take (a password) is refused, and not shown.
    with pytest.raises(sectorcrypt.InvalidArgument, match="unknown query parameter") as e:
        sectorcrypt.open(
            f"nbd+unix:///?socket={tmp_path}/nobody.sock&password=SECRETXYZ", PASS)
    assert "SECRETXYZ" not in str(e.value)


def test_format_an_nbd_export(tmp_path):
    img = tmp_path / "blank.img"
    with open(img, "wb") as f:
        f.truncate(20 * MIB)
    with Nbdkit(img, tmp_path, False) as kit:
        # The export's size is the volume's: another size is refused, nothing is made.
        with pytest.raises(sectorcrypt.InvalidArgument, match="export of"):
            sectorcrypt.format(kit.uri, PASS, size=8 * MIB, pbkdf="pbkdf2", iterations=1000)
        info = sectorcrypt.format(kit.uri, PASS, pbkdf="pbkdf2", iterations=1000)
        assert info["format"] == "luks2"
    need("cryptsetup")
    run_out = subprocess.run(["cryptsetup", "luksDump", str(img)], capture_output=True)
    assert run_out.returncode == 0, run_out.stderr
    with sectorcrypt.open(img, PASS) as vol:
        assert vol.info()["uuid"] == info["uuid"]
