//! The measured choice on a fake family and a fake clock: the clock advances only when a
//! fake backend runs its work, by that backend's fixed cost, so every figure and every
//! choice is exact and nothing depends on the machine or its load.

use super::super::{family, Algorithm, Selectable, Sharer};
use super::{Choices, Measurement, Workload, MARGIN, TIMINGS};
use crate::Error;
use std::cell::{Cell, RefCell};
use std::time::Duration;

family! {
    /// Four fake backends; none needs a CPU feature.
    pub enum Fake: Test, self_test: fake_self_test {
        /// First in the static order.
        First = "first", portable,
        Second = "second", portable,
        /// Fails its self-test (and is the fastest of all on the fake clock).
        Broken = "broken", portable,
        /// The portable one.
        Last = "last", portable,
    }
}

fn fake_self_test(b: Fake) -> bool {
    b != Fake::Broken
}

impl Selectable for Fake {
    const SHARING: &'static [Sharer] = &[Sharer::of::<Fake>()];
    const WORKLOAD: Workload<Fake> = workload(|_| Ok(()));
}

/// Bytes one fake run stands for.
const BYTES: usize = 4096;

/// The fake work, with `usable` as its own check: each run records its backend and
/// advances the fake clock by the backend's cost in this thread's `COSTS`.
const fn workload(usable: fn(Fake) -> Result<(), Error>) -> Workload<Fake> {
    Workload {
        algorithm: Algorithm::Test,
        what: "fake work",
        bytes: BYTES,
        usable,
        prepare: |b| {
            Ok(Box::new(move || {
                RUNS.with(|r| r.borrow_mut().push(b));
                let cost = COSTS.with(|c| c.get()[super::super::index(b)]);
                NOW.with(|n| n.set(n.get() + Duration::from_nanos(cost)));
            }))
        },
    }
}

/// Nanoseconds per run of `first`, `second`, `broken` and `last`.
const DEFAULT_COSTS: [u64; 4] = [300, 100, 10, 1000];

thread_local! {
    /// Nanoseconds one run costs, per backend in the static order.
    static COSTS: Cell<[u64; 4]> = const { Cell::new(DEFAULT_COSTS) };
    static NOW: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    static RUNS: RefCell<Vec<Fake>> = const { RefCell::new(Vec::new()) };
}

/// A fresh fake world for a test: the default costs, time zero, no runs (a test may run on
/// a thread an earlier one used).
fn reset(costs: [u64; 4]) {
    COSTS.with(|c| c.set(costs));
    NOW.with(|n| n.set(Duration::ZERO));
    RUNS.with(|r| r.borrow_mut().clear());
}

fn clock() -> Duration {
    NOW.with(|n| n.get())
}

fn runs() -> Vec<Fake> {
    RUNS.with(|r| r.borrow().clone())
}

fn choose(c: &Choices, forced: Option<&str>) -> Result<(Fake, Option<Measurement>), Error> {
    own(c.get(forced, &Fake::WORKLOAD, &clock))
}

/// A choice with its measurement copied out of the table.
fn own<M: Clone>(r: Result<(Fake, Option<&M>), Error>) -> Result<(Fake, Option<M>), Error> {
    r.map(|(b, m)| (b, m.cloned()))
}

#[test]
fn the_fastest_usable_candidate_is_chosen_with_its_figures() {
    reset(DEFAULT_COSTS);
    let (b, m) = choose(&Choices::new(), None).unwrap();
    assert_eq!(b, Fake::Second);
    let m = m.expect("two candidates: measured");
    assert_eq!(m.chosen, "second");
    assert_eq!(m.work, "fake work");
    // Bytes per second of the best timing: 4096 bytes in 300 and 100 ns. The portable
    // backend (`last`) is not measured beside them.
    let want = [("first", 4096e9 / 300.0), ("second", 4096e9 / 100.0)];
    assert_eq!(m.figures.len(), want.len(), "{:?}", m.figures);
    for ((name, got), (wname, wfig)) in m.figures.iter().zip(want) {
        assert_eq!(*name, wname);
        assert!((got - wfig).abs() < 1e-6 * wfig, "{name}: {got} != {wfig}");
    }
    assert!(!runs().contains(&Fake::Last), "{:?}", runs());
    // One untimed and TIMINGS timed runs each, all inside the measured time.
    let n = 1 + TIMINGS as u64;
    assert_eq!(m.took, Duration::from_nanos(n * (300 + 100)));
}

#[test]
fn a_backend_failing_its_self_test_is_never_timed_nor_chosen() {
    reset(DEFAULT_COSTS);
    let (b, m) = choose(&Choices::new(), None).unwrap();
    assert_ne!(b, Fake::Broken);
    assert!(!runs().contains(&Fake::Broken), "{:?}", runs());
    assert!(m.unwrap().figures.iter().all(|(n, _)| *n != "broken"));
    // Forced by name, it is refused, not measured.
    let e = choose(&Choices::new(), Some("broken")).unwrap_err();
    assert!(e.to_string().contains("self-test"), "{e}");
}

#[test]
fn the_static_order_wins_unless_a_later_backend_is_clearly_faster() {
    reset([100, 200, 10, 1]);
    assert_eq!(choose(&Choices::new(), None).unwrap().0, Fake::First);
    // Equal, and faster by less than the margin: the earlier backend stays.
    COSTS.with(|c| c.set([100, 100, 10, 1]));
    assert_eq!(choose(&Choices::new(), None).unwrap().0, Fake::First);
    const { assert!(100.0 / 97.0 < 1.0 + MARGIN) };
    COSTS.with(|c| c.set([100, 97, 10, 1]));
    assert_eq!(choose(&Choices::new(), None).unwrap().0, Fake::First);
    const { assert!(100.0 / 90.0 > 1.0 + MARGIN) };
    COSTS.with(|c| c.set([100, 90, 10, 1]));
    assert_eq!(choose(&Choices::new(), None).unwrap().0, Fake::Second);
}

#[test]
fn the_name_given_wins_and_nothing_is_measured() {
    reset(DEFAULT_COSTS);
    let c = Choices::new();
    let (b, m) = choose(&c, Some("last")).unwrap();
    assert_eq!((b, m), (Fake::Last, None));
    assert!(runs().is_empty(), "{:?}", runs());
    assert_eq!(clock(), Duration::ZERO);
    let e = choose(&Choices::new(), Some("nonsense")).unwrap_err();
    assert!(e.to_string().contains("nonsense"), "{e}");
}

#[test]
fn the_measurement_happens_once() {
    reset(DEFAULT_COSTS);
    let c = Choices::new();
    let first = choose(&c, None).unwrap();
    let after_first = runs().len();
    assert_eq!(after_first, 2 * (1 + TIMINGS));
    // Later costs would change the answer, but the choice is made.
    COSTS.with(|k| k.set([1, 1000, 1, 1000]));
    for _ in 0..3 {
        assert_eq!(choose(&c, None).unwrap(), first);
    }
    assert_eq!(runs().len(), after_first);
}

#[test]
fn a_workload_check_removes_candidates_and_one_left_is_not_measured() {
    reset(DEFAULT_COSTS);
    // Without `second`, `first` is the only candidate beside the portable backend.
    let not_second: Workload<Fake> = workload(|b| match b {
        Fake::Second => Err(Error::unknown_name("backend", "second", ["first"])),
        _ => Ok(()),
    });
    let (b, m) = own(Choices::new().get(None, &not_second, &clock)).unwrap();
    assert_eq!((b, m), (Fake::First, None));
    assert!(runs().is_empty(), "{:?}", runs());
    // Only the portable backend passes: it is taken, unmeasured.
    let only_last: Workload<Fake> = workload(|b| match b {
        Fake::Last => Ok(()),
        _ => Err(Error::unknown_name("backend", "x", ["last"])),
    });
    let (b, m) = own(Choices::new().get(None, &only_last, &clock)).unwrap();
    assert_eq!((b, m), (Fake::Last, None));
    assert!(runs().is_empty(), "{:?}", runs());
}
