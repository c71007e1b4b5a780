#!/usr/bin/env python3
"""Opens a LUKS1 or LUKS2 volume without sectorcrypt and without cryptsetup's ciphers:
the header parsed here (LUKS2: the JSON from `cryptsetup luksDump --dump-json-metadata`),
PBKDF2 from hashlib, the keyslot area and the data decrypted with Botan's XTS (python3-botan)
under dm-crypt's plain64 IVs (or CBC with plain64 or ESSIV IVs), the anti-forensic split merged here (LUKS's AF with its hash
diffusion), the volume key checked against the header's digest.

    luks-botan.py IMAGE PASSPHRASE_FILE PLAINTEXT_FILE

Prints the cipher and the sector size and exits 0 when the data area decrypts to PLAINTEXT_FILE (its length
from the data offset); exits 1 with the reason otherwise. Only XTS with plain64 IVs, CBC
with plain64 or essiv:sha256 IVs, and PBKDF2 keyslots (what the tests make)."""
import base64, hashlib, json, struct, subprocess, sys
import botan2

BOTAN = {"aes": "AES-{bits}", "serpent": "Serpent", "twofish": "Twofish",
         "camellia": "Camellia-{bits}"}


def fail(why):
    print(why)
    sys.exit(1)


def xts(cipher, key, data, sector_size, first_iv, step):
    """Decrypts `data` (whole sectors), sector i with the IV number first_iv + i * step:
    XTS with plain64 tweaks, or CBC with plain64 or essiv:sha256 IVs (the ESSIV cipher the
    same cipher under SHA-256 of the key, as the kernel's essiv template keys it)."""
    name, mode, iv = cipher.split("-", 2)
    if (mode, iv) not in [("xts", "plain64"), ("cbc", "plain64"), ("cbc", "essiv:sha256")]:
        fail(f"not an xts-plain64, cbc-plain64 or cbc-essiv:sha256 cipher: {cipher}")
    if mode == "xts":
        algo = BOTAN[name].format(bits=len(key) * 4) + "/XTS"
    else:
        algo = BOTAN[name].format(bits=len(key) * 8) + "/CBC/NoPadding"
    essiv = None
    if iv == "essiv:sha256":
        essiv = botan2.BlockCipher(BOTAN[name].format(bits=256))
        essiv.set_key(hashlib.sha256(key).digest())
    out = bytearray()
    for i in range(len(data) // sector_size):
        c = botan2.SymmetricCipher(algo, encrypt=False)
        c.set_key(key)
        block = struct.pack("<Q", first_iv + i * step) + bytes(8)
        c.start(essiv.encrypt(block) if essiv else block)
        out += c.finish(data[i * sector_size:(i + 1) * sector_size])
    return bytes(out)


def diffuse(buf, hash_name):
    size = hashlib.new(hash_name).digest_size
    out = bytearray()
    for j in range(0, len(buf), size):
        chunk = buf[j:j + size]
        out += hashlib.new(hash_name, struct.pack(">I", j // size) + chunk).digest()[:len(chunk)]
    return bytes(out)


def af_merge(material, key_len, stripes, hash_name):
    d = bytes(key_len)
    for i in range(stripes - 1):
        block = material[i * key_len:(i + 1) * key_len]
        d = diffuse(bytes(a ^ b for a, b in zip(d, block)), hash_name)
    last = material[(stripes - 1) * key_len:stripes * key_len]
    return bytes(a ^ b for a, b in zip(d, last))


def luks2(image, passphrase):
    meta = json.loads(subprocess.run(
        ["cryptsetup", "luksDump", "--dump-json-metadata", "--disable-locks", image],
        check=True, capture_output=True).stdout)
    seg = meta["segments"]["0"]
    digest = next(iter(meta["digests"].values()))
    for ks in meta["keyslots"].values():
        kdf, area, af = ks["kdf"], ks["area"], ks["af"]
        if kdf["type"] != "pbkdf2":
            continue
        area_key = hashlib.pbkdf2_hmac(kdf["hash"], passphrase, base64.b64decode(kdf["salt"]),
                                       kdf["iterations"], area["key_size"])
        with open(image, "rb") as f:
            f.seek(int(area["offset"]))
            raw = f.read(int(area["size"]))
        n = ks["key_size"] * af["stripes"]
        n += -n % 512
        material = xts(area["encryption"], area_key, raw[:n], 512, 0, 1)
        key = af_merge(material, ks["key_size"], af["stripes"], af["hash"])
        check = hashlib.pbkdf2_hmac(digest["hash"], key, base64.b64decode(digest["salt"]),
                                    digest["iterations"], len(base64.b64decode(digest["digest"])))
        if check == base64.b64decode(digest["digest"]):
            if seg.get("iv_tweak", "0") != "0":
                fail(f"iv_tweak {seg['iv_tweak']}: not handled here")
            return seg["encryption"], key, int(seg["offset"]), seg["sector_size"]
    fail("no pbkdf2 keyslot opens with the passphrase")


def luks1(image, passphrase, head):
    cstr = lambda b: b.split(b"\0", 1)[0].decode()
    cipher = cstr(head[8:40]) + "-" + cstr(head[40:72])
    hash_name = cstr(head[72:104])
    payload, key_len = struct.unpack(">II", head[104:112])
    mk_digest, mk_salt = head[112:132], head[132:164]
    (mk_iter,) = struct.unpack(">I", head[164:168])
    with open(image, "rb") as f:
        data = f.read(payload * 512)
    for s in range(8):
        at = 208 + 48 * s
        active, iters = struct.unpack(">II", head[at:at + 8])
        salt = head[at + 8:at + 40]
        offset, stripes = struct.unpack(">II", head[at + 40:at + 48])
        if active != 0x00AC71F3:
            continue
        area_key = hashlib.pbkdf2_hmac(hash_name, passphrase, salt, iters, key_len)
        n = key_len * stripes
        n += -n % 512
        material = xts(cipher, area_key, data[offset * 512:offset * 512 + n], 512, 0, 1)
        key = af_merge(material, key_len, stripes, hash_name)
        if hashlib.pbkdf2_hmac(hash_name, key, mk_salt, mk_iter, 20) == mk_digest:
            return cipher, key, payload * 512, 512
    fail("no keyslot opens with the passphrase")


def main():
    image, pass_file, plain_file = sys.argv[1:4]
    passphrase = open(pass_file, "rb").read()
    plain = open(plain_file, "rb").read()
    head = open(image, "rb").read(4096)
    if head[:6] != b"LUKS\xba\xbe":
        fail("not a LUKS header")
    version = struct.unpack(">H", head[6:8])[0]
    found = luks2(image, passphrase) if version == 2 else luks1(image, passphrase, head)
    cipher, key, offset, sector = found
    with open(image, "rb") as f:
        f.seek(offset)
        stored = f.read(len(plain))
    if xts(cipher, key, stored, sector, 0, sector // 512) != plain:
        fail(f"{cipher}: the data does not decrypt to the plaintext")
    print(cipher, sector)


main()
