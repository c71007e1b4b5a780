//! No key material is left in memory given back to the allocator: this test binary's
//! global allocator looks into every block freed while a GOST 28147-89 key with
//! CryptoPro key meshing is built, used over many meshing periods and dropped, for any of
//! the meshed keys `K_1, K_2, ...` (computed independently: `K_{i+1} = D_{K_i}(C)`, RFC
//! 4357 section 2.3).
//!
//! A test binary of its own: the allocator is process-wide.
#![allow(unsafe_code)]

use sectorcrypt_crypto::gost89::{self, Sbox};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The system allocator, which looks into freed blocks while [`WATCHING`] is set.
struct Inspecting;

static WATCHING: AtomicBool = AtomicBool::new(false);
/// The byte strings searched for (set before watching starts; never reallocated while
/// watching, so the allocator never allocates).
static NEEDLES: Mutex<Vec<[u8; 32]>> = Mutex::new(Vec::new());
/// How many freed blocks held a needle, and the first key index found.
static HITS: AtomicUsize = AtomicUsize::new(0);
static FIRST: AtomicUsize = AtomicUsize::new(usize::MAX);

// SAFETY: every call is passed to `System` unchanged; `dealloc` only reads the block it
// is given (valid for `layout.size()` bytes until it is handed back) before freeing it.
unsafe impl GlobalAlloc for Inspecting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if WATCHING.load(Ordering::SeqCst) && layout.size() >= 32 {
            // SAFETY: `ptr` is a live block of `layout.size()` bytes (the caller's contract).
            let block = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
            if let Ok(needles) = NEEDLES.try_lock() {
                if let Some(i) = needles
                    .iter()
                    .position(|n| block.windows(32).any(|w| w == n))
                {
                    HITS.fetch_add(1, Ordering::SeqCst);
                    FIRST.fetch_min(i, Ordering::SeqCst);
                }
            }
        }
        // SAFETY: the caller's contract for `dealloc` is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Inspecting = Inspecting;

/// The CryptoPro key meshing constant C (RFC 4357 section 2.3.2).
const MESH_C: [u8; 32] = [
    0x69, 0x00, 0x72, 0x22, 0x64, 0xC9, 0x04, 0x23, 0x8D, 0x3A, 0xDB, 0x96, 0x46, 0xE9, 0x2A, 0xC4,
    0x18, 0xFE, 0xAC, 0x94, 0x00, 0xED, 0x07, 0x12, 0xC0, 0x86, 0xDC, 0xC2, 0xEF, 0x4C, 0xA9, 0x2B,
];

#[test]
fn gost_key_meshing_leaves_no_key_in_freed_memory() {
    let sbox = Sbox::CryptoProA;
    let key: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5c);
    let periods = 100;
    // The meshed keys, one meshing step at a time (ECB without meshing, one key each).
    let mut keys = vec![key];
    while keys.len() <= periods {
        let mut next = MESH_C;
        gost89::Ecb::new(keys.last().unwrap(), sbox, false)
            .unwrap()
            .decrypt(&mut next)
            .unwrap();
        keys.push(next);
    }
    *NEEDLES.lock().unwrap() = keys[1..].to_vec();

    WATCHING.store(true, Ordering::SeqCst);
    let mut data = vec![0u8; periods * 1024];
    let cipher = gost89::Ecb::new(&key, sbox, true).unwrap();
    cipher.encrypt(&mut data).unwrap();
    drop(cipher);
    WATCHING.store(false, Ordering::SeqCst);

    // The data really went through the meshed keys: its last period is ECB under K_99.
    let last = (periods - 1) * 1024;
    let mut tail = data[last..].to_vec();
    gost89::Ecb::new(&keys[periods - 1], sbox, false)
        .unwrap()
        .decrypt(&mut tail)
        .unwrap();
    assert!(
        tail.iter().all(|&b| b == 0),
        "the last period is not under K_99"
    );
    let hits = HITS.load(Ordering::SeqCst);
    assert_eq!(
        hits,
        0,
        "{hits} freed blocks held meshed keys (the first: K_{})",
        FIRST.load(Ordering::SeqCst).wrapping_add(1)
    );
}
