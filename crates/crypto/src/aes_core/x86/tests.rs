//! Differential tests of every kernel of the x86 backends (aesni, vaes and avx512,
//! whichever this CPU has) against the soft backend: every block count from 0 to 72 (the group widths 8,
//! 16, 32 and 64 blocks plus and minus one, the one-register tails), the avx512 backend on
//! each register width, many sectors per call, in place and out of place, at
//! unaligned addresses, and CTR across the 2^64 carry and the 2^128 wrap. Plus an ignored,
//! release-mode timing of the hot vaes and avx512 kernels (run with
//! `cargo test --release -p sectorcrypt-crypto x86::tests::timing -- --ignored --nocapture`).

use super::avx512::Avx512Kernels;
use crate::aes_core::width::{Width, Widths};
use crate::aes_core::{expand_key, kernels, soft, AesKernels, Backend};
use crate::block::Block;
use crate::buf::InOut;

/// Deterministic test bytes (a 64-bit LCG), different for every `seed`.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 56) as u8
        })
        .collect()
}

/// The soft kernels for one key, and those of every x86 backend this CPU can run, each
/// with its name: the avx512 backend once per register width of its data kernels (ymm and
/// zmm, whatever the process would choose). The others are reported and skipped, naming
/// the missing CPU feature; one that this CPU runs but that fails its self-test is a
/// failure, not a skip.
fn pair(key_len: usize, seed: u64) -> Option<(soft::Keys, Vec<Tested>)> {
    let key = bytes(key_len, seed);
    let rk = expand_key(&key).unwrap();
    let mut tested: Vec<Tested> = Vec::new();
    for b in [Backend::Aesni, Backend::Vaes, Backend::Avx512] {
        match b.ensure_usable() {
            Ok(()) if b == Backend::Avx512 => {
                for w in Width::ALL {
                    let k = Avx512Kernels::new(&rk, Widths::all(w));
                    tested.push((format!("{b} {w}"), Box::new(k)));
                }
            }
            Ok(()) => tested.push((b.to_string(), kernels(b, &key).unwrap())),
            Err(e @ crate::Error::Backend(crate::BackendError::SelfTestFailed { .. })) => {
                panic!("{b}: {e}")
            }
            Err(e) => eprintln!("{b}: SKIPPED ({e})"),
        }
    }
    Some((soft::Keys::new(&rk), tested))
}

/// A tested backend's name (with the width) and its kernels.
type Tested = (String, Box<dyn AesKernels>);

/// Runs `run` on the reference and on each tested backend, out of place and in place, with
/// the buffers at several misalignments, and compares the output bytes and the returned
/// state.
fn check<S: PartialEq + std::fmt::Debug>(
    what: &str,
    len: usize,
    seed: u64,
    reference: &dyn AesKernels,
    tested: &[Tested],
    run: impl Fn(&dyn AesKernels, InOut<'_>) -> S,
) {
    for (name, t) in tested {
        check_one(
            &format!("{name} {what}"),
            len,
            seed,
            reference,
            t.as_ref(),
            &run,
        );
    }
}

fn check_one<S: PartialEq + std::fmt::Debug>(
    what: &str,
    len: usize,
    seed: u64,
    reference: &dyn AesKernels,
    tested: &dyn AesKernels,
    run: &impl Fn(&dyn AesKernels, InOut<'_>) -> S,
) {
    let input = bytes(len, seed);
    let mut want = vec![0u8; len];
    let want_state = run(reference, InOut::split(&input, &mut want));
    for offset in [0usize, 1, 7, 16, 33] {
        let mut src = vec![0u8; len + offset];
        src[offset..].copy_from_slice(&input);
        let mut dst = vec![0xa5u8; len + offset + 1];
        let state = run(
            tested,
            InOut::split(&src[offset..], &mut dst[offset..offset + len]),
        );
        assert_eq!(
            state, want_state,
            "{what}, {len} bytes, split at +{offset}: state"
        );
        assert!(
            dst[offset..offset + len] == want[..],
            "{what}, {len} bytes, split at +{offset}: output"
        );
        assert!(
            dst[..offset].iter().all(|&b| b == 0xa5) && dst[offset + len] == 0xa5,
            "{what}, {len} bytes, split at +{offset}: wrote outside the output"
        );
        let mut buf = src.clone();
        let state = run(tested, InOut::InPlace(&mut buf[offset..]));
        assert_eq!(
            state, want_state,
            "{what}, {len} bytes, in place at +{offset}: state"
        );
        assert!(
            buf[offset..] == want[..],
            "{what}, {len} bytes, in place at +{offset}: output"
        );
    }
}

#[test]
fn ecb_cbc_every_block_count_up_to_72() {
    for key_len in [16, 24, 32] {
        let Some((s, v)) = pair(key_len, key_len as u64) else {
            return;
        };
        for blocks in 0..=72usize {
            let (len, seed) = (16 * blocks, blocks as u64);
            check("ecb enc", len, seed, &s, &v, |k, d| k.ecb_encrypt(d));
            check("ecb dec", len, seed, &s, &v, |k, d| k.ecb_decrypt(d));
            let iv: Block = core::array::from_fn(|i| (i * 13 + blocks) as u8);
            check("cbc enc", len, seed, &s, &v, |k, d| {
                let mut iv = iv;
                k.cbc_encrypt(&mut iv, d);
                iv
            });
            check("cbc dec", len, seed, &s, &v, |k, d| {
                let mut iv = iv;
                k.cbc_decrypt(&mut iv, d);
                iv
            });
        }
    }
}

#[test]
fn ctr_every_block_count_and_counter_wraps() {
    // Starts with every kind of residue modulo 32 (the zmm kernel runs a head up to the
    // next multiple of 32 before its steady groups) and every carry; up to 104 blocks: a
    // head of up to 31, two groups of 32 and a tail.
    let starts = [
        0u128,
        1,
        0x1f,
        0x21,
        0x5a,
        (1u128 << 64) - 33,
        (1u128 << 64) - 32,
        0xf0,
        0xff - 15,
        0xff - 14,
        (1u128 << 64) - 20,
        (1u128 << 64) - 1,
        (1u128 << 64) + 0xf8,
        0x0123_4567_89ab_cdef_fedc_ba98_7654_32f7,
        u128::MAX - 40,
        u128::MAX - 5,
        u128::MAX,
    ];
    for key_len in [16, 24, 32] {
        let Some((s, v)) = pair(key_len, 100 + key_len as u64) else {
            return;
        };
        for start in starts {
            for blocks in 0..=104usize {
                check("ctr", 16 * blocks, blocks as u64, &s, &v, |k, d| {
                    let mut c = start;
                    k.ctr(&mut c, d);
                    c
                });
            }
        }
    }
    // A long run: many groups, crossing the 2^64 carry in the middle.
    let Some((s, v)) = pair(32, 7) else { return };
    check("ctr long", 16 * 1000, 9, &s, &v, |k, d| {
        let mut c = (1u128 << 64) - 500;
        k.ctr(&mut c, d);
        c
    });
}

/// CTR whose source and destination end where an inaccessible page begins, in place and
/// out of place: the zmm kernel's masked head and tail registers must touch no byte past
/// the buffers (a read or write there faults). Every block count up to a head, two groups
/// and a tail, from counters of several residues modulo 32, against the soft kernels.
#[test]
fn ctr_ends_at_a_guard_page() {
    use crate::guarded::Guarded;
    let Some((s, v)) = pair(32, 41) else { return };
    let (mut a, mut b) = (Guarded::new(2), Guarded::new(2));
    for start in [0u128, 1, 0x1f, 0x5a, u128::MAX - 3] {
        for blocks in 0..=104usize {
            let len = 16 * blocks;
            let data = bytes(len, blocks as u64);
            let mut want = data.clone();
            let mut c = start;
            s.ctr(&mut c, InOut::InPlace(&mut want));
            for (name, k) in &v {
                let (src, dst) = (a.tail(len), b.tail(len));
                src.copy_from_slice(&data);
                let mut got_c = start;
                k.ctr(&mut got_c, InOut::split(src, dst));
                assert!(
                    dst == &want[..],
                    "{name}: ctr from {start:#x}, {blocks} blocks, out of place"
                );
                assert_eq!(got_c, c, "{name}: counter from {start:#x}, {blocks} blocks");
                let buf = a.tail(len);
                buf.copy_from_slice(&data);
                let mut got_c = start;
                k.ctr(&mut got_c, InOut::InPlace(buf));
                assert!(
                    buf == &want[..],
                    "{name}: ctr from {start:#x}, {blocks} blocks, in place"
                );
            }
        }
    }
}

#[test]
fn xts_one_unit_every_block_count() {
    for key_len in [16, 24, 32] {
        let Some((s, v)) = pair(key_len, 200 + key_len as u64) else {
            return;
        };
        for blocks in 1..=72usize {
            let tweak: [Block; 1] = [core::array::from_fn(|i| (i * 31 + blocks * 7) as u8)];
            check("xts enc", 16 * blocks, blocks as u64, &s, &v, |k, d| {
                k.xts_encrypt(&tweak, d)
            });
            check("xts dec", 16 * blocks, blocks as u64, &s, &v, |k, d| {
                k.xts_decrypt(&tweak, d)
            });
        }
    }
}

#[test]
fn xts_many_units_per_call() {
    // Tweaks with the top bit set in various places, so the reductions by 0x87 happen at
    // every position in a unit.
    let tweaks: Vec<Block> = (0..520u32)
        .map(|i| {
            core::array::from_fn(|j| (i as u8).wrapping_mul(37).wrapping_add((j * 29) as u8) | 0x80)
        })
        .collect();
    for key_len in [16, 24, 32] {
        let Some((s, v)) = pair(key_len, 300 + key_len as u64) else {
            return;
        };
        let mut cases: Vec<(usize, usize)> = (1..=17).map(|n| (512, n)).collect();
        cases.extend([(4096, 1), (4096, 2), (4096, 5), (16, 17), (48, 9), (272, 5)]);
        cases.extend([(496, 3), (528, 3), (1024, 4), (2048, 3)]);
        // Units of one, three and three-and-a-bit groups of 256 bytes, and many 4096-byte
        // units: where the avx512 kernel switches from the next group's tweaks to the next
        // unit's, and its tail group.
        cases.extend([(256, 5), (768, 3), (784, 3), (4096, 17)]);
        // The zmm kernel's groups of 512 bytes: units of two and three groups, a group and
        // a bit, short units, a unit of one register.
        cases.extend([(1024, 3), (1536, 3), (528, 5), (1040, 3), (64, 9), (80, 7)]);
        // Calls of 8 KiB and more (the vaes kernel with the tweaks on the integer units for
        // 12- and 14-round keys): tails, units shorter than a group, the next unit's
        // tweaks prepared two groups ahead across short units.
        cases.extend([
            (784, 11),
            (272, 31),
            (496, 17),
            (16, 513),
            (48, 200),
            (2048, 5),
        ]);
        for (unit, n) in cases {
            let t = &tweaks[..n];
            let seed = (unit + n) as u64;
            check("xts enc units", unit * n, seed, &s, &v, |k, d| {
                k.xts_encrypt(t, d)
            });
            check("xts dec units", unit * n, seed, &s, &v, |k, d| {
                k.xts_decrypt(t, d)
            });
        }
    }
}

#[test]
fn cbc_many_sectors_per_call() {
    let ivs: Vec<Block> = (0..=255u8).map(|i| [i.wrapping_mul(11); 16]).collect();
    for key_len in [16, 32] {
        let Some((s, v)) = pair(key_len, 400 + key_len as u64) else {
            return;
        };
        let mut cases: Vec<(usize, usize)> = (1..=17).map(|n| (512, n)).collect();
        cases.extend([(4096, 1), (4096, 16), (4096, 17), (4096, 33), (2048, 19)]);
        cases.extend([(16, 40), (48, 31), (1024, 15)]);
        // Around the avx512 kernel's 24 chains (12 registers of two): whole batches, a batch
        // and a few registers, and a last odd sector on xmm.
        cases.extend([
            (4096, 24),
            (4096, 25),
            (4096, 48),
            (4096, 64),
            (512, 71),
            (2048, 47),
        ]);
        // Several sectors in turn per register (a register takes up its next sectors as
        // soon as its last ones end), in turns on unequal numbers of registers: on 8 ymm
        // registers, 4096 x 100 runs 1 turn on 8 and 6 on 7, 2048 x 90 3 on 8 and 3 on 7,
        // 512 x 181 6 on 8 and 6 on 7 and a last sector alone; on 12, five turns on 10,
        // 1 on 12 and 3 on 11, 2 on 12 and 6 on 11.
        cases.extend([(4096, 100), (2048, 90), (512, 181)]);
        // The zmm kernel's 32 chains (8 registers of four): whole batches, a register
        // short or over, and every remainder of chains that runs alone on xmm.
        cases.extend([
            (4096, 32),
            (4096, 35),
            (4096, 36),
            (512, 130),
            (2048, 67),
            (512, 33),
            (512, 34),
        ]);
        // The zmm kernel stores four steps at once where every sector has a multiple of
        // four blocks: sectors of one chunk of four (never steady), of two, of 5 and 65
        // blocks (one step at a time), of 260 blocks unskewed and 384 skewed, on 8
        // registers and fewer, in one turn and several.
        cases.extend([
            (64, 32),
            (128, 33),
            (128, 64),
            (80, 36),
            (1040, 32),
            (4160, 32),
            (6144, 34),
            (6144, 70),
            (192, 29),
        ]);
        for (size, n) in cases {
            let iv = &ivs[..n];
            let seed = (size * n) as u64;
            check("cbc enc sectors", size * n, seed, &s, &v, |k, d| {
                k.cbc_encrypt_sectors(iv, d)
            });
            check("cbc dec sectors", size * n, seed, &s, &v, |k, d| {
                k.cbc_decrypt_sectors(iv, d)
            });
        }
    }
}

/// Throwaway throughput figures for the hot vaes kernels (AES-256 unless
/// `SECTORCRYPT_TIMING_KEY` gives another key length in bytes), kernel level only: no tweak
/// encryption, no IV generation. `SECTORCRYPT_TIMING_BACKEND` names the one backend to time.
/// Release mode only gives meaningful numbers.
#[test]
#[ignore = "timing, not a test: run with --release --ignored --nocapture"]
fn timing() {
    for b in [Backend::Vaes, Backend::Avx512] {
        if std::env::var("SECTORCRYPT_TIMING_BACKEND").is_ok_and(|v| v != b.to_string()) {
            continue;
        }
        match b.ensure_usable() {
            Ok(()) => timing_of(b),
            Err(e) => eprintln!("{b}: SKIPPED ({e})"),
        }
    }
}

/// The figures of [`timing`] for one backend (`SECTORCRYPT_TIMING`: only the cases whose
/// name contains one of its comma-separated parts).
fn timing_of(b: Backend) {
    use std::time::Instant;
    let only = std::env::var("SECTORCRYPT_TIMING").unwrap_or_default();
    let key_len = std::env::var("SECTORCRYPT_TIMING_KEY").map_or(Ok(32), |v| v.parse());
    let key_len: usize = key_len.expect("SECTORCRYPT_TIMING_KEY: a key length in bytes");
    let v = kernels(b, &bytes(key_len, 1)).unwrap();
    let src = bytes(256 << 10, 3);
    let mut dst = vec![0u8; src.len()];
    let t: Vec<Block> = (0..128u8).map(|i| [i; 16]).collect();
    type Run<'a> = &'a dyn Fn(&dyn AesKernels, InOut<'_>);
    let (l, x) = (16 << 10, 64 << 10);
    let cases: [(&str, usize, Run<'_>); 18] = [
        ("xts-enc/4096", x, &|k, d| k.xts_encrypt(&t[..x / 4096], d)),
        ("xts-enc/4096x1", 4096, &|k, d| k.xts_encrypt(&t[..1], d)),
        ("xts-enc/512x1", 512, &|k, d| k.xts_encrypt(&t[..1], d)),
        // One unit per call, as GELI's authenticated sectors encrypt (480 and 256 bytes).
        ("xts-enc/256x1", 256, &|k, d| k.xts_encrypt(&t[..1], d)),
        ("xts-enc/480x1", 480, &|k, d| k.xts_encrypt(&t[..1], d)),
        ("xts-enc/1024x1", 1024, &|k, d| k.xts_encrypt(&t[..1], d)),
        ("xts-enc/2048x1", 2048, &|k, d| k.xts_encrypt(&t[..1], d)),
        ("xts-enc/512", x, &|k, d| k.xts_encrypt(&t[..x / 512], d)),
        ("xts-dec/4096", x, &|k, d| k.xts_decrypt(&t[..x / 4096], d)),
        ("xts-dec/512", x, &|k, d| k.xts_decrypt(&t[..x / 512], d)),
        ("ctr/16384", l, &|k, d| k.ctr(&mut 5, d)),
        ("ecb-enc/16384", l, &|k, d| k.ecb_encrypt(d)),
        ("ecb-dec/16384", l, &|k, d| k.ecb_decrypt(d)),
        ("cbc-dec/16384", l, &|k, d| k.cbc_decrypt(&mut [0; 16], d)),
        ("cbc-enc/16384", l, &|k, d| k.cbc_encrypt(&mut [0; 16], d)),
        ("cbc-enc-sectors/4096x64", 64 * 4096, &|k, d| {
            k.cbc_encrypt_sectors(&t[..64], d)
        }),
        ("cbc-enc-sectors/512x128", 128 * 512, &|k, d| {
            k.cbc_encrypt_sectors(&t[..128], d)
        }),
        ("cbc-dec-sectors/4096x64", 64 * 4096, &|k, d| {
            k.cbc_decrypt_sectors(&t[..64], d)
        }),
    ];
    for (name, len, run) in cases
        .into_iter()
        .filter(|c| only.split(',').any(|o| c.0.contains(o)))
    {
        let mut call = || run(v.as_ref(), InOut::split(&src[..len], &mut dst[..len]));
        for _ in 0..200 {
            call();
        }
        // Many runs of about a millisecond, each likely to fit in one time slice of a
        // loaded machine: the best and the 90th percentile are the undisturbed rate.
        let iters = ((16 << 20) / len).max(1);
        let mut runs: Vec<f64> = (0..300)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..iters {
                    call();
                }
                (len * iters) as f64 / start.elapsed().as_secs_f64() / 1e9
            })
            .collect();
        runs.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{b:<7} {name:<28} median {:6.2} GB/s  p90 {:6.2} GB/s  best {:6.2} GB/s",
            runs[runs.len() / 2],
            runs[runs.len() * 9 / 10],
            runs[runs.len() - 1]
        );
    }
}
