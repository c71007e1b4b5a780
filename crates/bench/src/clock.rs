//! The core clock, measured in this process: no performance counters are needed.
//!
//! A loop whose body is a dependent chain of eight single-cycle integer operations (add and
//! xor alternating, with operands the optimiser cannot see through) runs at one operation
//! per cycle on any out-of-order x86 core; the loop counter and branch execute in parallel
//! on other ports. Eight operations per iteration times the iterations, divided by the wall
//! time, is the clock. The best of several short runs is taken (the least disturbed).

use std::hint::black_box;
use std::time::Instant;

fn chain(iterations: u64) -> f64 {
    let (a, b, c, d) = black_box((
        0x9e37_79b9_u64,
        0x85eb_ca6b_u64,
        0xc2b2_ae35_u64,
        0x27d4_eb2f_u64,
    ));
    let mut x = black_box(1u64);
    let start = Instant::now();
    for _ in 0..iterations {
        x = x.wrapping_add(a) ^ b;
        x = x.wrapping_add(c) ^ d;
        x = x.wrapping_add(a) ^ c;
        x = x.wrapping_add(b) ^ d;
    }
    black_box(x);
    start.elapsed().as_secs_f64()
}

/// The clock in GHz; `quick` measures for less time.
pub fn measure_ghz(quick: bool) -> f64 {
    let iterations: u64 = if quick { 2_000_000 } else { 20_000_000 };
    chain(iterations / 10); // warm up: let the core reach its steady clock
    (0..5)
        .map(|_| 8.0 * iterations as f64 / chain(iterations) / 1e9)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clock_is_in_a_plausible_range() {
        // Debug builds run the chain slower than one op per cycle; only a sanity range.
        let ghz = super::measure_ghz(true);
        assert!(ghz.is_finite() && ghz > 0.05 && ghz < 10.0, "{ghz}");
    }
}
