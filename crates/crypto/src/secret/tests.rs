//! The secret types: contents, growth without copies left behind, and how the kernel
//! sees their pages (/proc/self/smaps: locked, not dumped).

use super::region::{page_size, Region};
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

/// Checks the kernel's view of `r`'s pages against the protection it reports.
fn check_pages(r: &Region) {
    let (flags, name) = mapping(r.start().as_ptr() as usize);
    let has = |f: &str| flags.iter().any(|x| x == f);
    match r.protection() {
        Protection::Secretmem => assert!(name.contains("secretmem"), "{name} {flags:?}"),
        Protection::Locked => assert!(has("lo") && has("dd"), "{flags:?}"),
        Protection::Unlocked => assert!(has("dd") && !has("lo"), "{flags:?}"),
    }
    if r.protection() != Protection::Unlocked {
        assert!(has("lo"), "{name}: {flags:?}");
    }
    assert!(has("dd"), "{name}: {flags:?}");
}

#[test]
fn regions_are_whole_zeroed_pages_out_of_core_dumps() {
    for secretmem in [true, false] {
        let mut r = Region::with(100, secretmem);
        assert_eq!(r.bytes().len(), page_size());
        assert!(r.bytes().iter().all(|&b| b == 0));
        r.bytes_mut()[..4].copy_from_slice(b"abcd");
        assert_eq!(&r.bytes()[..4], b"abcd");
        assert_eq!(r.start().as_ptr() as usize % page_size(), 0);
        check_pages(&r);
        if !secretmem {
            assert_ne!(r.protection(), Protection::Secretmem);
        }
    }
    assert!(protection().is_some());
    let empty = Region::with(0, true);
    assert!(empty.bytes().is_empty());
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
    assert!(s.capacity() >= want.len() && s.capacity().is_multiple_of(page_size()));
    check_pages(&s.region);
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
