"""LUKS2, LUKS1 and GELI volumes as Python file objects, on sectorcrypt's engine.

    import sectorcrypt, zipfile
    with sectorcrypt.open("disk.img", passphrase="secret") as vol:
        print(vol.info())               # format, cipher, sector size, size, uuid...
        head = vol.read_at(4096, 0)     # plaintext at any offset
        vol.seek(1 << 20)
        zipfile.ZipFile(vol)            # any reader of file objects

- ``open(locator, passphrase=... | key_file=..., header=None, readonly=True)`` unlocks a
  volume and returns a :class:`Volume` (an ``io.RawIOBase``: readinto, read, write,
  seek, tell; plus ``read_at``, ``readinto_at``, ``write_at``, ``size``, ``info()``).
  The locator is what ``sectorcrypt read`` takes: a path, an NBD URI
  (``nbd://host[:port]/export``, ``nbd+unix:///export?socket=PATH``, ``nbds://``...) or
  an ``rbd:pool/image`` spec.
- ``format(path, passphrase=..., type="luks2"|"luks1"|"geli", ...)`` creates one.
- ``SectorCipher(spec, key)`` encrypts and decrypts dm-crypt sectors in place in any
  writable buffer (bytearray, memoryview, numpy array).

Errors: :class:`Error` and its subclasses :class:`WrongPassphrase`,
:class:`CorruptHeader` (and its :class:`NoHeader`), :class:`AuthenticationError`,
:class:`Unsupported`, :class:`InvalidArgument`, :class:`InUse`, :class:`KeyslotError`;
``OSError`` (with its errno) for I/O, and :class:`Unreachable` (a ``ConnectionError``)
for a remote store that cannot be reached. Passphrases and keys are
copied into locked memory that is wiped after use, and never appear in messages or reprs.
Every transfer, key derivation and encryption runs with the GIL released.
"""

import io
import os

from . import _native
from ._native import (
    AuthenticationError,
    CorruptHeader,
    Error,
    InUse,
    InvalidArgument,
    KeyslotError,
    NoHeader,
    SectorCipher,
    Unreachable,
    Unsupported,
    WrongPassphrase,
)

__all__ = [
    "open",
    "format",
    "Volume",
    "SectorCipher",
    "Error",
    "WrongPassphrase",
    "CorruptHeader",
    "AuthenticationError",
    "Unsupported",
    "InvalidArgument",
    "NoHeader",
    "InUse",
    "KeyslotError",
    "Unreachable",
]
__version__ = _native.__version__


class Volume(io.RawIOBase):
    """An open volume: its plaintext as a seekable binary file of ``size`` bytes.

    Reads and writes at the current position move it; ``read_at``, ``readinto_at`` and
    ``write_at`` take an offset and leave it. A read past the end returns what is there
    (``b""`` at the end); a write past the end writes what fits and fails with ENOSPC when
    nothing does: a volume does not grow. Writes on a read-only volume raise
    ``io.UnsupportedOperation``. ``flush()`` makes writes durable; ``close()`` flushes.
    """

    def __init__(self, native):
        super().__init__()
        self._native = native
        self._pos = 0

    # The engine's handle and the position, for the methods below.
    def _handle(self):
        if self.closed:
            raise ValueError("I/O operation on closed volume")
        return self._native

    def _check_writable(self):
        if self._handle().readonly:
            raise io.UnsupportedOperation("the volume is open read-only (readonly=True)")

    @property
    def name(self):
        """The image's path, as given to :func:`open`."""
        return self._native.name

    @property
    def size(self):
        """The plaintext size in bytes."""
        return self._native.size

    @property
    def readonly(self):
        """Whether the volume was opened read-only."""
        return self._native.readonly

    def info(self):
        """A dict: format, cipher, sector_size, data_offset, size, keyslot, uuid."""
        return self._handle().info()

    def readable(self):
        self._handle()
        return True

    def writable(self):
        return not self._handle().readonly

    def seekable(self):
        self._handle()
        return True

    def tell(self):
        self._handle()
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        self._handle()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence!r}, should be 0, 1 or 2)")
        if pos < 0:
            raise OSError(22, f"negative seek position {pos}")
        self._pos = pos
        return pos

    def readinto(self, b):
        n = self._handle().readinto_at(b, self._pos)
        self._pos += n
        return n

    def readall(self):
        return self.read(max(self.size - self._pos, 0))

    def read(self, size=-1):
        if size is None or size < 0:
            return self.readall()
        data = self._handle().read_at(size, self._pos)
        self._pos += len(data)
        return data

    def write(self, b):
        self._check_writable()
        n = self._native.write_at(b, self._pos)
        self._pos += n
        return n

    def truncate(self, size=None):
        raise io.UnsupportedOperation("a volume has a fixed size")

    def read_at(self, size, offset):
        """Up to ``size`` bytes of plaintext at ``offset`` (fewer at the end)."""
        return self._handle().read_at(size, offset)

    def readinto_at(self, b, offset):
        """Fills the writable buffer ``b`` with the plaintext at ``offset``, decrypted
        where it lies; returns the bytes read (fewer than ``len(b)`` at the end)."""
        return self._handle().readinto_at(b, offset)

    def write_at(self, data, offset):
        """Writes the bytes-like ``data`` at ``offset``; returns the bytes written."""
        self._check_writable()
        return self._native.write_at(data, offset)

    def flush(self):
        if not self._native.closed and not self._native.readonly:
            self._native.flush()

    def close(self):
        if not self.closed:
            try:
                super().close()  # calls flush()
            finally:
                self._native.close()

    def __repr__(self):
        state = "closed" if self.closed else ("ro" if self.readonly else "rw")
        return f"<sectorcrypt.Volume {self.name!r} {state}>"


def open(
    path,
    passphrase=None,
    *,
    key_file=None,
    header=None,
    readonly=True,
    keyslot=None,
    keyfiles=None,
    threads=None,
    shared=False,
    connections=None,
    timeout=None,
    retry=None,
    type=None,
    veracrypt_pim=None,
    tcrypt_hidden=False,
    tcrypt_backup=False,
    tcrypt_system=False,
    hash=None,
    cipher=None,
    protect_hidden=None,
    protect_hidden_keyfiles=None,
    protect_hidden_pim=None,
):
    """Unlocks the volume ``path`` names and returns a :class:`Volume`.

    LUKS2, LUKS1, GELI, BitLocker and FileVault 2 are detected. VeraCrypt and TrueCrypt
    volumes have no signature: name them with ``type="veracrypt"`` (VeraCrypt's KDFs only)
    or ``type="tcrypt"`` (TrueCrypt's too), with cryptsetup's options:
    ``veracrypt_pim``, ``tcrypt_hidden`` (the hidden volume), ``tcrypt_backup`` (the
    backup header), ``tcrypt_system`` (system encryption), ``hash`` and ``cipher`` (try only
    the KDFs and cipher chains whose names contain them: each KDF tried costs its full
    iterations), and VeraCrypt keyfiles in ``keyfiles``. ``protect_hidden`` (the hidden volume's passphrase, str or bytes, with
    ``protect_hidden_keyfiles`` and ``protect_hidden_pim``) opens the outer volume with
    its hidden volume protected, as VeraCrypt's "protect hidden volume": a write that
    touches the hidden volume raises ``InvalidArgument`` and nothing of it is written.
    ``type="fvault2"`` reads a FileVault 2 volume whose header is damaged, to say why.

    ``path``: a file or block device, an NBD URI (``nbd://host[:port]/export``,
    ``nbd+unix:///export?socket=PATH``, ``nbds://``, ``nbds+unix://``) or an
    ``rbd:pool/image`` spec, as ``sectorcrypt read`` takes them. For a remote store,
    ``connections`` (default 4, when the server allows several), ``timeout`` (seconds per
    connection or request, default 30, 0 for none) and ``retry`` (reconnections per
    request, default 0) as the command's ``--connections``, ``--remote-timeout`` and
    ``--retry``.

    ``passphrase`` (str or bytes) or ``key_file`` (a path: all its bytes are the
    passphrase, as cryptsetup's ``--key-file``). ``header``: a detached header's file.
    ``readonly=False`` to write. ``keyslot``: try only this one. ``keyfiles``: GELI's
    keyfile components, in order (with no passphrase for a provider made with ``-P``),
    or a VeraCrypt volume's keyfiles.
    ``threads``: the engine's workers for large requests (default: the cores).
    The image is claimed as the ``sectorcrypt`` command claims it, until ``close``:
    one writer at a time, and no read-only open beside a writer unless ``shared=True``
    (cryptsetup's ``--shared``: the data read may change under it); a refused open
    raises ``InUse`` naming the holder (its PID and command line).
    """
    native = _native.open(
        path if isinstance(path, str) else os.fspath(path),
        passphrase,
        key_file=None if key_file is None else os.fspath(key_file),
        header=None if header is None else os.fspath(header),
        readonly=readonly,
        keyslot=keyslot,
        keyfiles=None if keyfiles is None else [os.fspath(k) for k in keyfiles],
        threads=threads,
        shared=shared,
        connections=connections,
        timeout=timeout,
        retry=retry,
        type=type,
        veracrypt_pim=veracrypt_pim,
        tcrypt_hidden=tcrypt_hidden,
        tcrypt_backup=tcrypt_backup,
        tcrypt_system=tcrypt_system,
        hash=hash,
        cipher=cipher,
        protect_hidden=protect_hidden,
        protect_hidden_keyfiles=None
        if protect_hidden_keyfiles is None
        else [os.fspath(k) for k in protect_hidden_keyfiles],
        protect_hidden_pim=protect_hidden_pim,
    )
    return Volume(native)


def format(path, passphrase=None, **options):
    """Creates a volume in ``path`` and returns its ``info()`` dict.

    ``path`` is a locator, as for :func:`open`: a file or block device (created, readable
    by its owner only, when missing and ``size`` is given), an NBD URI or an
    ``rbd:pool/image`` spec (whose size is the export's: another ``size`` is refused). A
    volume in use raises ``InUse``; a file made here is removed again when formatting
    fails.

    Options (keywords): ``key_file``; ``type`` ("luks2", "luks1", "geli" or "veracrypt");
    ``cipher``
    (LUKS: "aes-xts-plain64", "aes-cbc-essiv:sha256", ...; GELI: "aes-xts", "aes-cbc",
    "null"); ``key_size`` in bits; ``sector_size``; ``size`` (creates a sparse image of
    that many bytes when ``path`` does not exist); ``header`` (LUKS: a detached header's
    file); ``pbkdf`` ("argon2id", "argon2i", "pbkdf2"); ``iterations`` (PBKDF2
    iterations or the Argon2 time cost, instead of calibrating: for tests);
    ``iter_time`` (calibration target, ms); ``pbkdf_memory`` (Argon2, KiB);
    ``pbkdf_parallel`` (Argon2 lanes); ``hash`` (LUKS: PBKDF2's and the AF splitter's,
    "sha256" by default); ``label`` (LUKS2); ``rbd_object_size`` (LUKS on an RBD image:
    its data aligned to the object size); ``integrity`` (GELI: "hmac-sha256", ...; every
    sector is then written, unless ``no_wipe=True``); ``keyfiles`` (GELI keyfile
    components; VeraCrypt keyfiles); ``volume_key`` (LUKS: bytes to use as the volume key
    instead of random ones). VeraCrypt (``type="veracrypt"``): ``cipher`` a chain ("aes",
    the default, "serpent-twofish-aes", ...), ``hash`` PBKDF2's ("sha512" by default),
    ``pim`` (15000 + 1000 x PIM iterations instead of 500000); ``hidden_size`` makes a
    hidden volume at the end of the outer data, opened by ``hidden_passphrase`` or
    ``hidden_key_file`` (and ``hidden_keyfiles``, ``hidden_pim``). Defaults and refusals
    are those of ``sectorcrypt format`` (one creator in the library): the same options make
    the same headers but for their random fields.
    """
    for k in ("key_file", "header", "hidden_key_file"):
        if options.get(k) is not None:
            options[k] = os.fspath(options[k])
    for k in ("keyfiles", "hidden_keyfiles"):
        if options.get(k) is not None:
            options[k] = [os.fspath(f) for f in options[k]]
    return _native.format(path if isinstance(path, str) else os.fspath(path), passphrase,
                          **options)
