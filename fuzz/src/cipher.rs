//! The cipher-string target: the input is a cipher string (up to the first newline), then
//! the bytes that choose a key, a sector layout and the data. A string parses exactly when
//! it is one of `CipherSpec::ALL` and prints back as itself; a cipher is built exactly when
//! the key length is one the spec lists (and the layout is valid); every usable backend
//! then encrypts the data alike, and decryption gives it back.

use sectorcrypt_crypto::dmcrypt::{CipherSpec, SectorCipher, SectorLayout};
use sectorcrypt_crypto::Backend;

/// Data encrypted at most per run.
const MAX_DATA: usize = 64 << 10;

/// Takes `n` bytes from the front of `rest` (zeros once it runs out).
fn take<const N: usize>(rest: &mut &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = N.min(rest.len());
    out[..n].copy_from_slice(&rest[..n]);
    *rest = &rest[n..];
    out
}

/// The cipher-string target.
pub fn cipher_spec(data: &[u8]) {
    let cut = data.iter().position(|&c| c == b'\n').unwrap_or(data.len());
    let Ok(name) = std::str::from_utf8(&data[..cut]) else {
        return;
    };
    let mut rest = data.get(cut + 1..).unwrap_or_default();
    let spec = match name.parse::<CipherSpec>() {
        Ok(spec) => {
            assert!(CipherSpec::ALL.contains(&name), "{name:?} parsed");
            assert_eq!(spec.to_string(), name);
            spec
        }
        Err(e) => {
            assert!(!CipherSpec::ALL.contains(&name), "{name:?} refused: {e}");
            return;
        }
    };
    let [key_choice, flags] = take::<2>(&mut rest);
    let lengths = spec.key_lengths();
    let key_len = if key_choice & 0x80 != 0 {
        (key_choice & 0x7f) as usize
    } else {
        lengths[key_choice as usize % lengths.len()]
    };
    let key = rest.get(..key_len).map(<[u8]>::to_vec);
    let key = key.unwrap_or_else(|| (0..key_len).map(|i| i as u8 ^ 0x5a).collect());
    rest = rest.get(key_len..).unwrap_or_default();
    let sector_size = u16::from_le_bytes(take::<2>(&mut rest)) as usize + 1;
    let first = u64::from_le_bytes(take::<8>(&mut rest));
    let Ok(layout) = SectorLayout::new(sector_size, flags & 1 != 0) else {
        return;
    };
    let cipher = match SectorCipher::new(spec, &key, layout) {
        Ok(c) => c,
        Err(e) => {
            // The only other refusal: XTS with equal key halves.
            let equal_halves = key.len() % 2 == 0 && key[..key.len() / 2] == key[key.len() / 2..];
            assert!(
                !lengths.contains(&key_len) || equal_halves,
                "a {key_len}-byte key refused for {name}: {e}"
            );
            return;
        }
    };
    assert!(
        lengths.contains(&key_len),
        "a {key_len}-byte key taken for {name}"
    );
    let mut plain = rest.to_vec();
    plain.truncate(MAX_DATA);
    if flags & 2 == 0 {
        plain.truncate(plain.len() / sector_size * sector_size);
    }
    let mut want = plain.clone();
    let whole = plain.len().is_multiple_of(sector_size);
    match cipher.encrypt(first, &mut want) {
        Ok(()) => assert!(
            whole,
            "{} bytes taken in {sector_size}-byte sectors",
            plain.len()
        ),
        Err(_) => {
            assert!(
                !whole,
                "{} bytes refused in {sector_size}-byte sectors",
                plain.len()
            );
            return;
        }
    }
    for backend in Backend::usable() {
        let other = SectorCipher::with_backend(spec, &key, layout, backend).expect("usable");
        let mut got = plain.clone();
        other.encrypt(first, &mut got).expect("encrypts");
        assert!(got == want, "{backend} encrypts {name} differently");
        other.decrypt(first, &mut got).expect("decrypts");
        assert!(got == plain, "{backend} does not decrypt {name} back");
    }
}
