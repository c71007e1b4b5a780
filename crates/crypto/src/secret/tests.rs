//! The secret types: contents, growth without copies left behind, the pool's slots, and
//! how the kernel sees their pages (/proc/self/smaps: locked, not dumped).

use super::pages::{page_size, Pages};
use super::pool::Region;
use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `VmFlags` and name of the mapping holding `addr`, from /proc/self/smaps.
fn mapping(addr: usize) -> (Vec<String>, String) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    let mut name = String::new();
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = (a..b).contains(&addr);
                name = line
                    .split_whitespace()
                    .skip(5)
                    .collect::<Vec<_>>()
                    .join(" ");
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return (flags.split_whitespace().map(String::from).collect(), name);
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}

/// Checks the kernel's view of the memory at `addr` against `protection`: never dumped,
/// locked unless `Unlocked`, memfd_secret's when `Secretmem`.
fn check_memory(addr: usize, protection: Protection) {
    let (flags, name) = mapping(addr);
    let has = |f: &str| flags.iter().any(|x| x == f);
    assert!(has("dd"), "{name}: {flags:?}");
    assert_eq!(
        has("lo"),
        protection != Protection::Unlocked,
        "{name}: {flags:?}"
    );
    assert_eq!(
        name.contains("secretmem"),
        protection == Protection::Secretmem,
        "{name}"
    );
}

#[test]
fn pages_are_whole_zeroed_and_out_of_core_dumps() {
    for secretmem in [true, false] {
        let mut p = Pages::with(100, secretmem);
        assert_eq!(p.bytes().len(), page_size());
        assert!(p.bytes().iter().all(|&b| b == 0));
        p.bytes_mut()[..4].copy_from_slice(b"abcd");
        assert_eq!(&p.bytes()[..4], b"abcd");
        assert_eq!(p.start().as_ptr() as usize % page_size(), 0);
        check_memory(p.start().as_ptr() as usize, p.protection());
        if !secretmem {
            assert_ne!(p.protection(), Protection::Secretmem);
        }
    }
    assert!(protection().is_some());
    assert!(Pages::with(0, true).bytes().is_empty());
}

#[test]
fn small_regions_are_distinct_aligned_slots_zeroed_when_reused() {
    let sizes = [1, 31, 32, 33, 100, 500, 1000, 2048];
    let mut held: Vec<Region> = Vec::new();
    for round in 0..3u8 {
        for (n, &size) in sizes.iter().cycle().take(200).enumerate() {
            let mut r = Region::new(size);
            let len = r.bytes().len();
            assert!(
                len >= size && len.is_power_of_two() && len <= 2048,
                "{size}: {len}"
            );
            assert_eq!(r.start().as_ptr() as usize % len, 0, "slot alignment");
            assert!(
                r.bytes().iter().all(|&b| b == 0),
                "a reused slot was not wiped"
            );
            r.bytes_mut()
                .fill(round.wrapping_mul(31).wrapping_add(n as u8) | 1);
            held.push(r);
        }
        // No two live regions overlap.
        let mut spans: Vec<(usize, usize)> = held
            .iter()
            .map(|r| (r.start().as_ptr() as usize, r.bytes().len()))
            .collect();
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
        check_memory(spans[0].0, held[0].protection());
        // Free every other one; the next round takes their slots again.
        let mut i = 0;
        held.retain(|_| {
            i += 1;
            i % 2 == 0
        });
    }
    let big = Region::new(2049);
    assert_eq!(big.bytes().len(), page_size());
    assert!(Region::new(0).bytes().is_empty());
}

#[test]
fn slots_are_shared_safely_between_threads() {
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..2000usize {
                    let mut a = SecretBytes::zeroed(1 + i % 300);
                    a.fill(t + 1);
                    let b = Secret::new([t; 40]);
                    assert!(a.iter().all(|&x| x == t + 1) && b.iter().all(|&x| x == t));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn bytes_grow_keeping_every_byte() {
    let mut s = SecretBytes::new();
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.protection(), None);
    let mut want = Vec::new();
    for i in 0..3000u32 {
        let piece = [(i % 251) as u8; 7];
        s.extend_from_slice(&piece);
        want.extend_from_slice(&piece);
    }
    assert_eq!(&s[..], &want[..]);
    assert!(s.capacity() >= want.len());
    check_memory(s.as_ptr() as usize, s.protection().unwrap());
    s.push(9);
    assert_eq!(s.last(), Some(&9));
    let c = s.clone();
    assert_eq!(&c[..], &s[..]);
}

#[test]
fn spare_capacity_stays_zero() {
    let mut s = SecretBytes::with_capacity(10);
    s.spare_capacity_mut()[..5].copy_from_slice(b"hello");
    s.set_len(5);
    assert_eq!(&s[..], b"hello");
    s.set_len(2);
    assert!(s.spare_capacity_mut().iter().all(|&b| b == 0));
    s.clear();
    assert!(s.is_empty());
    assert!(s.spare_capacity_mut().iter().all(|&b| b == 0));
    let z = SecretBytes::zeroed(64);
    assert_eq!(&z[..], &[0u8; 64][..]);
    assert_eq!(&SecretBytes::from_slice(b"key")[..], b"key");
}

#[test]
fn debug_shows_no_secret() {
    let s = SecretBytes::from_slice(b"hunter2");
    let d = format!("{s:?}");
    assert!(!d.contains("hunter2") && !d.contains("104"), "{d}");
    let b = Secret::new(*b"hunter2");
    assert!(!format!("{b:?}").contains("104"));
}

#[test]
fn a_secret_value_is_dropped_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Clone)]
    struct Counted([u64; 600]);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let mut b = Secret::new(Counted([7; 600]));
    b.0[599] = 8;
    let c = b.clone();
    assert_eq!((b.0[0], b.0[599], c.0[599]), (7, 8, 8));
    drop(b);
    drop(c);
    assert_eq!(DROPS.load(Ordering::SeqCst), 2);
}
