#!/usr/bin/env python3
"""An independent reference model of FreeBSD's GELI on-disk format, for the tests.

Written from the format's facts as FreeBSD states them (sys/geom/eli/g_eli.h for the
metadata layout, versions and flags; g_eli_key.c for the master-key slots; g_eli_crypto.c
and g_eli.c for the IVs; g_eli_key_cache.c for the per-zone keys; g_eli_integrity.c for
authenticated sectors; lib/geom/eli/geom_eli.c for the user key) and cross-read with
GRUB's grub-core/disk/geli.c. It shares no code with sectorcrypt.

Commands (all print JSON or write files; exit 0 on success, 3 on a wrong key, 2 on bad
input):
  info IMG [--md-sector N]                  metadata of the last sector, MD5 checked
  unlock IMG --passfile F [--keyfile K]...  which slot opens, the master key's HMAC check
  decrypt IMG --out PLAIN (keys as unlock)  the whole data area, decrypted
  create IMG --size BYTES [--put OFF:FILE]... --passfile F [--keyfile K]...
         [--cipher aes-xts|aes-cbc|camellia-cbc] [--keylen N] [--sectorsize S] [--iterations I]
         [--version V] [--seed HEX] [--aalgo hmac-sha256|...]
                                            an image; without --aalgo only the sectors
                                            under --put are written (the rest stay holes)
  john FILE                                 opens John the Ripper's $geli$ vectors (a JSON
                                            list of {hash, password}) and wrong passwords
  vectors                                   known answers derived from the formulas
"""

import argparse
import hashlib
import hmac
import json
import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

MAGIC = b"GEOM::ELI\0\0\0\0\0\0\0"  # g_eli.h G_ELI_MAGIC, in a 16-byte field
MD_SIZE = 511  # g_eli.h: the encoded metadata, MD5 included
SALTLEN = 64  # G_ELI_SALTLEN
MKEYLEN = 192  # G_ELI_MKEYLEN: IV key (64) || data key (64) || HMAC-SHA512 (64)
MAXMKEYS = 2  # G_ELI_MAXMKEYS
KEY_SHIFT = 20  # G_ELI_KEY_SHIFT: a new key every 2^20 sectors

# Algorithm numbers (sys/opencrypto/cryptodev.h: CRYPTO_SHA1_HMAC 7, CRYPTO_RIPEMD160_HMAC
# 8, CRYPTO_AES_CBC 11, CRYPTO_NULL_CBC 16, CRYPTO_SHA2_256_HMAC 18, _384 19, _512 20,
# CRYPTO_CAMELLIA_CBC 21, CRYPTO_AES_XTS 22).
ALG_AES_CBC = 11
ALG_CAMELLIA_CBC = 21
ALG_AES_XTS = 22
ALG_NULL = 16
EALGO = {ALG_AES_CBC: "AES-CBC", ALG_AES_XTS: "AES-XTS", ALG_NULL: "NULL", 21: "CAMELLIA-CBC"}
AALGO = {0: None, 7: "HMAC/SHA1", 8: "HMAC/RIPEMD160", 18: "HMAC/SHA256", 19: "HMAC/SHA384",
         20: "HMAC/SHA512"}
AALGO_NAMES = {"hmac-sha1": 7, "hmac-ripemd160": 8, "hmac-sha256": 18, "hmac-sha384": 19,
               "hmac-sha512": 20}
AALGO_HASH = {7: "sha1", 8: "ripemd160", 18: "sha256", 19: "sha384", 20: "sha512"}

# g_eli.h flags: on-disk ones, then the runtime ones that the version implies.
FLAG_AUTH = 0x10
FLAG_NATIVE_BYTE_ORDER = 0x10000
FLAG_SINGLE_KEY = 0x20000
FLAG_FIRST_KEY = 0x80000
FLAG_ENC_IVKEY = 0x100000


class BadInput(Exception):
    """The image or the arguments are not what GELI makes."""


class WrongKey(Exception):
    """No slot opens with the given passphrase and keyfiles."""


def hmac512(key, data):
    return hmac.new(key, data, hashlib.sha512).digest()


def aes_cbc(key, iv, data, encrypt):
    c = Cipher(algorithms.AES(key), modes.CBC(iv))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def camellia_cbc(key, iv, data, encrypt):
    """Camellia-CBC from Botan (python3-botan), imported only here: the AES providers
    need no Botan. FreeBSD's g_eli_crypto.c runs CRYPTO_CAMELLIA_CBC as AES-CBC is run
    (userland: EVP_camellia_{128,192,256}_cbc with the provider's key length)."""
    import botan2
    c = botan2.SymmetricCipher(f"Camellia-{len(key) * 8}/CBC/NoPadding", encrypt=encrypt)
    c.set_key(key)
    c.start(iv)
    return bytes(c.finish(bytes(data)))


def cbc(md, key, iv, data, encrypt):
    """The provider's CBC: Camellia for CAMELLIA-CBC, AES otherwise (AES-XTS's slots)."""
    run = camellia_cbc if md["ealgo"] == ALG_CAMELLIA_CBC else aes_cbc
    return run(key, iv, data, encrypt)


def aes_xts(key, tweak, data, encrypt):
    c = Cipher(algorithms.AES(key), modes.XTS(tweak))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


# ---- metadata -----------------------------------------------------------------------

# little-endian: magic, version, flags, ealgo, keylen, aalgo, provsize, sectorsize, keys,
# iterations, salt, mkeys; then the MD5 of all of it (g_eli.h eli_metadata_encode_v1v2v3
# ... v7, which all share this layout; version 0 lacks aalgo and is not modelled).
MD_FMT = "<16sIIHHHQIBi64s384s"
assert struct.calcsize(MD_FMT) == MD_SIZE - 16


def parse_md(sector):
    if len(sector) < MD_SIZE:
        raise BadInput("metadata sector too short")
    body, digest = sector[: MD_SIZE - 16], sector[MD_SIZE - 16: MD_SIZE]
    (magic, version, flags, ealgo, keylen, aalgo, provsize, sectorsize, keys, iterations,
     salt, mkeys) = struct.unpack(MD_FMT, body)
    if magic != MAGIC:
        raise BadInput("no GEOM::ELI magic")
    if hashlib.md5(body).digest() != digest:
        raise BadInput("metadata MD5 mismatch")
    if not 1 <= version <= 7:
        raise BadInput(f"unsupported version {version}")
    md = dict(magic="GEOM::ELI", version=version, flags=flags, ealgo=ealgo,
              ealgo_name=EALGO.get(ealgo), keylen=keylen, aalgo=aalgo,
              aalgo_name=AALGO.get(aalgo), provsize=provsize, sectorsize=sectorsize,
              keys=keys, iterations=iterations, salt=salt.hex(), mkeys=mkeys.hex(),
              md5=digest.hex())
    md["runtime_flags"] = runtime_flags(md)
    return md


def encode_md(md):
    body = struct.pack(MD_FMT, MAGIC, md["version"], md["flags"], md["ealgo"], md["keylen"],
                       md["aalgo"], md["provsize"], md["sectorsize"], md["keys"],
                       md["iterations"], bytes.fromhex(md["salt"]),
                       bytes.fromhex(md["mkeys"]))
    return body + hashlib.md5(body).digest()


def runtime_flags(md):
    """The flags g_eli.c adds on attach for older versions (g_eli.h version history)."""
    f = md["flags"]
    v = md["version"]
    if v < 4:
        f |= FLAG_NATIVE_BYTE_ORDER  # IVs from the offset in host order (x86: the same)
    if v < 5:
        f |= FLAG_SINGLE_KEY  # one data key for the whole provider
    if v < 6 and f & FLAG_AUTH:
        f |= FLAG_FIRST_KEY  # authenticated providers keep using key 0
    if v < 7:
        f |= FLAG_ENC_IVKEY  # per-zone keys derived from the IV key
    return f


def read_md(path, md_sector=512):
    size = os.path.getsize(path)
    if size < md_sector:
        raise BadInput("image shorter than one sector")
    with open(path, "rb") as f:
        f.seek(size - md_sector)
        return parse_md(f.read(md_sector)), size


# ---- keys ---------------------------------------------------------------------------


def user_key(md, passphrase, keyfiles):
    """lib/geom/eli/geom_eli.c eli_genkey: HMAC-SHA512 with an empty key over the keyfiles'
    bytes, then salt || passphrase (iterations 0) or PBKDF2-HMAC-SHA512(passphrase, salt,
    iterations, 64) (iterations > 0); iterations -1 means no passphrase at all."""
    h = hmac.new(b"", b"", hashlib.sha512)
    for k in keyfiles:
        h.update(k)
    salt = bytes.fromhex(md["salt"])
    if md["iterations"] == 0:
        h.update(salt)
        h.update(passphrase)
    elif md["iterations"] > 0:
        h.update(hashlib.pbkdf2_hmac("sha512", passphrase, salt, md["iterations"], 64))
    return h.digest()


def mkey_cipher_keylen(md):
    """g_eli_key.c encrypts the slots with the provider's key length in AES-CBC (XTS is
    replaced by CBC for the slots, g_eli_crypto.c). NULL providers keep their slots as
    they are: g_eli_crypto.c's cipher for CRYPTO_NULL_CBC is EVP_enc_null() (0 here)."""
    return (md["keylen"] or 128) // 8 if md["ealgo"] != ALG_NULL else 0


def slot_cbc(md, enckey, data, encrypt):
    """The slot cipher: the provider's CBC (AES-XTS: AES-CBC; g_eli_crypto_cipher) with
    a zero IV, or nothing for NULL (an empty key)."""
    return cbc(md, enckey, bytes(16), data, encrypt) if enckey else bytes(data)


def mkey_hmac(ukey, mkey128):
    return hmac512(hmac512(ukey, b"\x00"), mkey128)


def open_slots(md, ukey):
    """g_eli_key.c g_eli_mkey_decrypt: each used slot, AES-CBC with a zero IV under
    HMAC-SHA512(userkey, 0x01) cut to the key length; the slot's last 64 bytes must equal
    HMAC-SHA512(HMAC-SHA512(userkey, 0x00), IV key || data key)."""
    enckey = hmac512(ukey, b"\x01")[: mkey_cipher_keylen(md)]
    mkeys = bytes.fromhex(md["mkeys"])
    for slot in range(MAXMKEYS):
        if not md["keys"] & (1 << slot):
            continue
        plain = slot_cbc(md, enckey, mkeys[slot * MKEYLEN:(slot + 1) * MKEYLEN], False)
        if hmac.compare_digest(plain[128:], mkey_hmac(ukey, plain[:128])):
            return slot, plain[:128]
    raise WrongKey("no slot opens with this passphrase and these keyfiles")


def seal_slot(md, ukey, mkey128):
    enckey = hmac512(ukey, b"\x01")[: mkey_cipher_keylen(md)]
    return slot_cbc(md, enckey, mkey128 + mkey_hmac(ukey, mkey128), True)


class Volume:
    """The keys of an opened provider and its sector transform."""

    def __init__(self, md, mkey128, imagesize, md_sector=512):
        self.md = md
        self.flags = md["runtime_flags"]
        self.ivkey = mkey128[:64]
        self.datakey = mkey128[64:128]
        self.secsize = md["sectorsize"]
        self.auth = bool(self.flags & FLAG_AUTH)
        if self.auth:
            # g_eli.c g_eli_create: tag | data | padding in each underlying sector; the
            # data is (sector - tag) rounded down to 16; one decrypted sector spans
            # bytes_per_sector underlying bytes. The encryption key is
            # HMAC-SHA512(data key, 0x10) (g_eli_key_cache.c g_eli_key_init), the tag key
            # HMAC-SHA512(data key, 0x11) (g_eli_key.c g_eli_mkey_propagate).
            self.alen = hashlib.new(AALGO_HASH[md["aalgo"]]).digest_size
            self.enc = md_sector
            self.dps = (self.enc - self.alen) // 16 * 16
            self.bps = ((self.secsize - 1) // self.dps + 1) * self.enc
            self.akey = hmac512(self.datakey, b"\x11")
            base = hmac512(self.datakey, b"\x10")
            self.mediasize = (imagesize - md_sector) // self.bps * self.secsize
        else:
            base = self.datakey
            self.mediasize = (imagesize - md_sector) // self.secsize * self.secsize
        self.single = base
        # g_eli_key_cache.c g_eli_key_fill: zone keys from the IV key when ENC_IVKEY
        # (versions before 7), otherwise from the (authenticated: derived) data key.
        self.ekey = self.ivkey if self.flags & FLAG_ENC_IVKEY else base
        self._zones = {}

    def zone_key(self, offset, blocksize=None):
        if self.flags & FLAG_SINGLE_KEY:
            return self.single
        blocksize = blocksize or self.secsize
        zone = (offset >> KEY_SHIFT) // blocksize  # g_eli_key_hold
        if self.flags & FLAG_FIRST_KEY:
            zone = 0  # g_eli.c: before version 6 authenticated providers used key 0
        k = self._zones.get(zone)
        if k is None:
            k = hmac512(self.ekey, b"ekey" + struct.pack("<Q", zone))
            self._zones[zone] = k
        return k

    def iv(self, offset):
        """g_eli_crypto.c g_eli_crypto_ivgen: XTS takes le64(offset) || 0^8; CBC takes
        the first 16 bytes of SHA-256(IV key || le64(offset))."""
        off = struct.pack("<Q", offset)
        if self.md["ealgo"] == ALG_AES_XTS:
            return off + bytes(8)
        return hashlib.sha256(self.ivkey + off).digest()[:16]

    def unit(self, offset, data, encrypt, blocksize=None):
        """One cipher unit (a sector, or an authenticated sector's data) at offset."""
        n = self.md["keylen"] // 8
        if self.md["ealgo"] == ALG_NULL:
            return bytes(data)
        if self.md["ealgo"] == ALG_AES_XTS:
            key = self.zone_key(offset, blocksize)[: 2 * n]  # both XTS halves
            return aes_xts(key, self.iv(offset), data, encrypt)
        if self.md["ealgo"] in (ALG_AES_CBC, ALG_CAMELLIA_CBC):
            key = self.zone_key(offset, blocksize)[:n]
            return cbc(self.md, key, self.iv(offset), data, encrypt)
        raise BadInput(f"cipher {self.md['ealgo']} not modelled")

    def crypt(self, offset, data, encrypt):
        """Non-authenticated: whole sectors at a byte offset of the provider."""
        assert not self.auth
        assert offset % self.secsize == 0 and len(data) % self.secsize == 0
        out = bytearray()
        for i in range(0, len(data), self.secsize):
            out += self.unit(offset + i, data[i:i + self.secsize], encrypt)
        return bytes(out)

    def tag(self, offset, ciphertext):
        """g_eli_integrity.c g_eli_auth_keygen: the sector key is SHA-256(akey ||
        le64(offset of the underlying sector)); the tag is HMAC-<aalgo> under it over
        the sector's ciphertext (encrypt-then-MAC)."""
        skey = hashlib.sha256(self.akey + struct.pack("<Q", offset)).digest()
        return hmac.new(skey, ciphertext, AALGO_HASH[self.md["aalgo"]]).digest()

    def _auth_parts(self, lsec):
        """(underlying offset, data length) of each underlying sector of sector lsec."""
        n = self.bps // self.enc
        base = lsec * self.bps
        for i in range(1, n + 1):
            dlen = self.dps if i % n else self.secsize % self.dps
            yield base + (i - 1) * self.enc, dlen

    def auth_seal(self, lsec, plain):
        out = bytearray()
        pos = 0
        for off, dlen in self._auth_parts(lsec):
            ct = self.unit(off, plain[pos:pos + dlen], True, self.enc)
            pos += dlen
            sec = self.tag(off, ct) + ct
            out += sec + bytes(self.enc - len(sec))
        return bytes(out)

    def auth_open(self, lsec, raw):
        """The plaintext of sector lsec from its bytes_per_sector raw bytes, or None when
        a tag does not verify."""
        out = bytearray()
        for off, dlen in self._auth_parts(lsec):
            r = raw[off - lsec * self.bps:off - lsec * self.bps + self.enc]
            tag, ct = r[: self.alen], r[self.alen:self.alen + dlen]
            if not hmac.compare_digest(tag, self.tag(off, ct)):
                return None
            out += self.unit(off, ct, False, self.enc)
        return bytes(out)


def open_image(path, passphrase, keyfiles, md_sector=512):
    md, size = read_md(path, md_sector)
    slot, mkey = open_slots(md, user_key(md, passphrase, keyfiles))
    return Volume(md, mkey, size, md_sector), slot


def decrypt_all(vol, image, out):
    """Writes the decrypted provider to out; returns the authenticated sectors whose tags
    fail (written as zeros)."""
    bad = []
    with open(image, "rb") as f, open(out, "wb") as o:
        if not vol.auth:
            step = vol.secsize * 256
            for off in range(0, vol.mediasize, step):
                n = min(step, vol.mediasize - off)
                f.seek(off)
                o.write(vol.crypt(off, f.read(n), False))
            return bad
        for lsec in range(vol.mediasize // vol.secsize):
            f.seek(lsec * vol.bps)
            plain = vol.auth_open(lsec, f.read(vol.bps))
            if plain is None:
                bad.append(lsec)
                plain = bytes(vol.secsize)
            o.write(plain)
    return bad


# ---- creation -----------------------------------------------------------------------


def create(path, size, puts, passphrase, keyfiles, ealgo, keylen, sectorsize, iterations,
           version, seed, flags=0, aalgo=0):
    """Writes a GELI image of size bytes. puts are (offset, bytes) of the decrypted
    provider; only their sectors are written (the rest stay holes), except that an
    authenticated image is written whole, as `geli init -a` expects."""
    if size % 512 or size < sectorsize + 512:
        raise BadInput("size must be a multiple of 512 and hold one sector")
    rnd = hashlib.shake_256(seed).digest(SALTLEN + 128) if seed else os.urandom(SALTLEN + 128)
    if aalgo:
        flags |= FLAG_AUTH
    md = dict(version=version, flags=flags, ealgo=ealgo, keylen=keylen, aalgo=aalgo,
              provsize=size, sectorsize=sectorsize, keys=1, iterations=iterations,
              salt=rnd[:SALTLEN].hex(), mkeys="00" * (MKEYLEN * MAXMKEYS))
    md["runtime_flags"] = runtime_flags(md)
    mkey = rnd[SALTLEN:]
    slot0 = seal_slot(md, user_key(md, passphrase, keyfiles), mkey)
    md["mkeys"] = (slot0 + bytes(MKEYLEN)).hex()
    vol = Volume(md, mkey, size)
    with open(path, "wb") as f:
        f.truncate(size)
        if vol.auth:
            plain = bytearray(vol.mediasize)
            for off, data in puts:
                if off + len(data) > vol.mediasize:
                    raise BadInput(f"{off}+{len(data)} passes the data area")
                plain[off:off + len(data)] = data
            for lsec in range(vol.mediasize // sectorsize):
                f.seek(lsec * vol.bps)
                f.write(vol.auth_seal(lsec, plain[lsec * sectorsize:(lsec + 1) * sectorsize]))
        for off, data in puts if not vol.auth else []:
            if off % sectorsize:
                raise BadInput(f"offset {off} is not on a sector boundary")
            data = data + bytes(-len(data) % sectorsize)
            if off + len(data) > vol.mediasize:
                raise BadInput(f"{off}+{len(data)} passes the data area")
            f.seek(off)
            f.write(vol.crypt(off, data, True))
        f.seek(size - 512)
        f.write(encode_md(md) + b"\0")
    return md


# ---- command line -------------------------------------------------------------------


def key_args(a):
    passphrase = b""
    if a.passfile:
        with open(a.passfile, "rb") as f:
            passphrase = f.read()
        # geom_eli.c eli_genkey_files: a passfile counts up to its first newline
        passphrase = passphrase.split(b"\n", 1)[0]
    keyfiles = []
    for k in a.keyfile or []:
        with open(k, "rb") as f:
            keyfiles.append(f.read())
    return passphrase, keyfiles


def vectors():
    """Known answers from the formulas alone, for the Rust side to compare with."""
    md = dict(version=7, flags=0, ealgo=ALG_AES_XTS, keylen=128, aalgo=0,
              provsize=1 << 20, sectorsize=512, keys=1, iterations=0,
              salt=bytes(range(64)).hex(), mkeys="00" * 384)
    md["runtime_flags"] = runtime_flags(md)
    mkey = bytes(range(128))
    out = {}
    for v in (4, 5, 6, 7):
        md["version"] = v
        md["runtime_flags"] = runtime_flags(md)
        vol = Volume(dict(md), mkey, 1 << 30)
        out[f"v{v}_zone1_key"] = vol.zone_key(512 << 20).hex()
    auth = Volume(dict(md, version=7, flags=FLAG_AUTH, aalgo=18,
                       runtime_flags=FLAG_AUTH), mkey, 1 << 20)
    sealed = auth.auth_seal(0, bytes(512))
    out["auth_sha256_sector0_layout"] = dict(taglen=auth.alen, data_per_sector=auth.dps,
                                             bytes_per_sector=auth.bps)
    out["auth_sha256_sector0_tags"] = [sealed[i:i + auth.alen].hex()
                                       for i in range(0, len(sealed), auth.enc)]
    out["userkey_i0"] = user_key(md, b"password", []).hex()
    out["userkey_kf"] = user_key(dict(md, iterations=-1), b"", [b"key1", b"key2"]).hex()
    return out


def john(path):
    """Each `$geli$0$version$ealgo$keylen$aalgo$keys$iterations$salt$mkeys` string holds
    the key-derivation fields of a metadata sector; opens it with its password (must
    succeed) and with the password plus one byte (must fail)."""
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for c in cases:
        f = c["hash"].split("$")
        md = dict(version=int(f[3]), flags=0, ealgo=int(f[4]), keylen=int(f[5]),
                  aalgo=int(f[6]), keys=int(f[7]), iterations=int(f[8]), salt=f[9],
                  mkeys=f[10])
        pw = c["password"].encode("utf-8")
        slot, mkey = open_slots(md, user_key(md, pw, []))
        try:
            open_slots(md, user_key(md, pw + b"x", []))
            wrong = "opened"
        except WrongKey:
            wrong = "refused"
        out.append(dict(iterations=md["iterations"], keylen=md["keylen"], slot=slot,
                        wrong_password=wrong, mkey_sha256=hashlib.sha256(mkey).hexdigest()))
    return out


def main(argv):
    p = argparse.ArgumentParser(description="GELI reference model")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("info", "unlock", "decrypt", "create", "vectors", "john"):
        s = sub.add_parser(name)
        if name == "john":
            s.add_argument("file")
        if name in ("vectors", "john"):
            continue
        s.add_argument("image")
        s.add_argument("--md-sector", type=int, default=512)
        if name == "info":
            continue
        s.add_argument("--passfile")
        s.add_argument("--keyfile", action="append")
        if name == "decrypt":
            s.add_argument("--out", required=True)
        if name == "create":
            s.add_argument("--size", type=int, required=True)
            s.add_argument("--put", action="append", default=[])
            s.add_argument("--cipher", default="aes-xts",
                           choices=["aes-xts", "aes-cbc", "camellia-cbc", "null"])
            s.add_argument("--keylen", type=int, default=128)
            s.add_argument("--sectorsize", type=int, default=512)
            s.add_argument("--iterations", type=int, default=0)
            s.add_argument("--version", type=int, default=7)
            s.add_argument("--aalgo", default="none", choices=["none", *AALGO_NAMES])
            s.add_argument("--seed")
    a = p.parse_args(argv)
    try:
        if a.cmd == "john":
            print(json.dumps(john(a.file), indent=1))
        elif a.cmd == "vectors":
            print(json.dumps(vectors(), indent=1))
        elif a.cmd == "info":
            md, size = read_md(a.image, a.md_sector)
            md["mediasize"] = size
            print(json.dumps(md, indent=1))
        elif a.cmd == "unlock":
            vol, slot = open_image(a.image, *key_args(a), a.md_sector)
            print(json.dumps(dict(slot=slot, datasize=vol.mediasize)))
        elif a.cmd == "decrypt":
            vol, slot = open_image(a.image, *key_args(a), a.md_sector)
            bad = decrypt_all(vol, a.image, a.out)
            print(json.dumps(dict(slot=slot, datasize=vol.mediasize, bad_sectors=bad)))
        elif a.cmd == "create":
            passphrase, keyfiles = key_args(a)
            puts = []
            for spec in a.put:
                off, _, fname = spec.partition(":")
                with open(fname, "rb") as f:
                    puts.append((int(off), f.read()))
            ealgo = {"aes-xts": ALG_AES_XTS, "aes-cbc": ALG_AES_CBC,
                     "camellia-cbc": ALG_CAMELLIA_CBC, "null": ALG_NULL}[a.cipher]
            seed = bytes.fromhex(a.seed) if a.seed else None
            md = create(a.image, a.size, puts, passphrase, keyfiles, ealgo, a.keylen,
                        a.sectorsize, a.iterations, a.version, seed,
                        aalgo=AALGO_NAMES.get(a.aalgo, 0))
            print(json.dumps(dict(md5=hashlib.md5(encode_md(md)[:-16]).hexdigest())))
    except WrongKey as e:
        print(f"geli_ref: {e}", file=sys.stderr)
        return 3
    except BadInput as e:
        print(f"geli_ref: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
