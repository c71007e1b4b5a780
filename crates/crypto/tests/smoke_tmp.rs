use sectorcrypt_crypto::*;
#[test]
fn smoke() {
    for b in Backend::ALL {
        println!("{b}: {:?}", b.ensure_usable());
    }
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(29) ^ 0x5a).collect();
    for b in [Backend::Vaes, Backend::Aesni] {
        if b.ensure_usable().is_err() {
            continue;
        }
        for n in 0..=40usize {
            let data: Vec<u8> = (0..n * 16 + 3).map(|i| (i * 13 + 7) as u8).collect();
            for off in [0usize, 3] {
                let inp = &data[off..off + n * 16];
                let mut a = vec![0u8; n * 16];
                let mut s = vec![0u8; n * 16];
                Ecb::with_backend(&key[..32], b)
                    .unwrap()
                    .encrypt_to(inp, &mut a)
                    .unwrap();
                Ecb::with_backend(&key[..32], Backend::Soft)
                    .unwrap()
                    .encrypt_to(inp, &mut s)
                    .unwrap();
                assert_eq!(a, s, "ecb enc {n}");
                Ecb::with_backend(&key[..24], b)
                    .unwrap()
                    .decrypt_to(inp, &mut a)
                    .unwrap();
                Ecb::with_backend(&key[..24], Backend::Soft)
                    .unwrap()
                    .decrypt_to(inp, &mut s)
                    .unwrap();
                assert_eq!(a, s, "ecb dec {n}");
                let iv = [7u8; 16];
                Cbc::with_backend(&key[..16], b)
                    .unwrap()
                    .decrypt_to(&iv, inp, &mut a)
                    .unwrap();
                Cbc::with_backend(&key[..16], Backend::Soft)
                    .unwrap()
                    .decrypt_to(&iv, inp, &mut s)
                    .unwrap();
                assert_eq!(a, s, "cbc dec {n}");
                let mut ivm = [0xffu8; 16];
                ivm[7] = 0xfe;
                ivm[15] = 0xf0;
                for iv in [[0xffu8; 16], ivm, [1u8; 16]] {
                    Ctr::with_backend(&key[..32], b)
                        .unwrap()
                        .apply_keystream_to(&iv, 5, inp, &mut a)
                        .unwrap();
                    Ctr::with_backend(&key[..32], Backend::Soft)
                        .unwrap()
                        .apply_keystream_to(&iv, 5, inp, &mut s)
                        .unwrap();
                    assert_eq!(a, s, "ctr {n}");
                }
                if n >= 1 {
                    let x = Xts::with_backend(&key, b).unwrap();
                    let y = Xts::with_backend(&key, Backend::Soft).unwrap();
                    let m = n * 16 - (n % 5).min(15) * (n > 1) as usize;
                    let (mut a, mut s) = (vec![0u8; m], vec![0u8; m]);
                    x.encrypt_to(&iv, &inp[..m], &mut a).unwrap();
                    y.encrypt_to(&iv, &inp[..m], &mut s).unwrap();
                    assert_eq!(a, s, "xts enc {m}");
                    x.decrypt_to(&iv, &inp[..m], &mut a).unwrap();
                    y.decrypt_to(&iv, &inp[..m], &mut s).unwrap();
                    assert_eq!(a, s, "xts dec {m}");
                }
            }
        }
        for spec in ["aes-xts-plain64", "aes-cbc-essiv:sha256", "aes-cbc-plain"] {
            let spec: CipherSpec = spec.parse().unwrap();
            let k = if spec.mode == CipherMode::Xts {
                &key[..64]
            } else {
                &key[..32]
            };
            for ss in [512usize, 4096] {
                for n in 1..=17usize {
                    let lay = SectorLayout::new(ss, false).unwrap();
                    let data: Vec<u8> = (0..n * ss).map(|i| (i * 31 + 1) as u8).collect();
                    let mut a = data.clone();
                    let mut s = data.clone();
                    SectorCipher::with_backend(spec, k, lay, b)
                        .unwrap()
                        .encrypt(99, &mut a)
                        .unwrap();
                    SectorCipher::with_backend(spec, k, lay, Backend::Soft)
                        .unwrap()
                        .encrypt(99, &mut s)
                        .unwrap();
                    assert_eq!(a, s, "{spec} {ss} {n}");
                    SectorCipher::with_backend(spec, k, lay, b)
                        .unwrap()
                        .decrypt(99, &mut a)
                        .unwrap();
                    assert_eq!(a, data);
                }
            }
        }
        println!("{b} matches soft");
    }
}
