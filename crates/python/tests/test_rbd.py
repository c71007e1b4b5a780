"""``sectorcrypt.open`` and ``sectorcrypt.format`` on Ceph RBD images, by the same ``rbd:``
spec ``sectorcrypt read`` takes: a LUKS2 volume cryptsetup made, imported into the
single-node test cluster (``scripts/ceph.sh``), read and written through librbd, exported
back and checked against dm-crypt's formula. Runs when the package was built with its
``rbd`` feature (``run-tests.sh`` does so where librbd-dev is installed, and says so in
``SECTORCRYPT_PY_RBD``)."""

import os
import pathlib
import subprocess

import pytest

import sectorcrypt
from conftest import MIB, PASS, cryptsetup_volume, luks_header_offset, pattern, run, xts

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A cluster for this module's tests: its conf file, stopped at the end."""
    if os.environ.get("SECTORCRYPT_PY_RBD") != "1":
        pytest.skip("the package was built without its rbd feature (librbd-dev missing)")
    state = tmp_path_factory.mktemp("ceph")
    started = subprocess.run(
        ["bash", str(ROOT / "scripts/ceph.sh"), "start", str(state / "c"),
         "--until-exit", str(os.getpid())],
        capture_output=True, text=True)
    if started.returncode != 0:
        pytest.skip(f"no ceph cluster: {started.stdout.strip()} {started.stderr.strip()}")
    conf = state / "c" / "ceph.conf"
    assert conf.exists(), started.stdout
    yield conf
    subprocess.run(["bash", str(ROOT / "scripts/ceph.sh"), "stop", str(state / "c")],
                   capture_output=True)


def rbd(conf, *args):
    return run("rbd", "--conf", str(conf), *args)


def test_open_read_and_write_an_rbd_image(tmp_path, xts_key, cluster):
    img = cryptsetup_volume(tmp_path / "v.img", xts_key, size=24 * MIB)
    offset = luks_header_offset(img)
    plain = pattern(64 * 1024, 15)
    at = 5 * 4096
    with open(img, "r+b") as f:
        f.seek(offset + at)
        f.write(xts(xts_key, plain, at // 512, 512, True))
    name = f"py-{os.getpid()}"
    rbd(cluster, "import", str(img), f"rbd/{name}")
    spec = f"rbd:rbd/{name}:conf={cluster}"
    new = pattern(8192, 16)
    try:
        with sectorcrypt.open(spec, PASS, readonly=False, threads=2) as vol:
            assert vol.info()["format"] == "luks2"
            assert vol.size == 24 * MIB - offset
            assert vol.read_at(len(plain), at) == plain
            assert vol.write_at(new, 16 * 512) == len(new)
            vol.flush()
        with pytest.raises(sectorcrypt.WrongPassphrase):
            sectorcrypt.open(spec, b"not it")
        back = tmp_path / "back.img"
        rbd(cluster, "export", f"rbd/{name}", str(back))
    finally:
        rbd(cluster, "rm", f"rbd/{name}")
    with open(back, "rb") as f:
        f.seek(offset + 16 * 512)
        assert f.read(len(new)) == xts(xts_key, new, 16, 512, True)


def test_format_an_rbd_image_aligned_to_its_objects(tmp_path, cluster):
    name = f"pyfmt-{os.getpid()}"
    rbd(cluster, "create", "--size", "64M", f"rbd/{name}")
    spec = f"rbd:rbd/{name}:conf={cluster}"
    try:
        sectorcrypt.format(spec, PASS, rbd_object_size=4 * MIB, pbkdf="pbkdf2",
                           iterations=1000)
        with sectorcrypt.open(spec, PASS, readonly=False) as vol:
            assert vol.info()["data_offset"] % (4 * MIB) == 0
            vol.write_at(b"x" * 4096, 0)
        back = tmp_path / "fmt.img"
        rbd(cluster, "export", f"rbd/{name}", str(back))
    finally:
        rbd(cluster, "rm", f"rbd/{name}")
    # cryptsetup agrees: a LUKS2 header with the passphrase.
    run("cryptsetup", "open", "--test-passphrase", "--key-file", "-", str(back), stdin=PASS)
