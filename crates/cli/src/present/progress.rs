//! Progress of long work on standard error: `read`, `write`, `erase`, the GELI wipe of a
//! new authenticated provider (bytes), and key derivation (KDF calibration for
//! `--iter-time` and each derivation, timed).
//!
//! `--progress` says how: `auto` draws a line with `indicatif` when standard error is a
//! terminal and prints nothing otherwise (so every output a script or test compares stays
//! byte for byte what it was); `none` prints nothing; `json` prints one JSON object a line
//! (docs/JSON.md, "`--progress=json`"): one as the work begins, one a second, and one as
//! it ends. Nothing secret is ever shown: byte counts, times, the KDF and its costs.
//!
//! The work itself only adds to an atomic counter ([`Progress::add`]); a thread of the
//! progress wakes 10 times a second (a bar) or once a second (JSON) to read it and draw,
//! so a copy loop is never slowed by drawing. The KDF steps come from the volume crate's
//! observer (`sectorcrypt_volume::kdf::progress`), which knows nothing of the display.

use clap::ValueEnum;
use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sectorcrypt_volume::kdf::progress::{KdfEvent, KdfStep};
use serde_json::json;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `--progress` (the flag's own help says what each value does: values without help keep
/// clap's long help on one line per flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ProgressMode {
    // A progress line when standard error is a terminal, nothing otherwise.
    #[default]
    Auto,
    // No progress output.
    #[value(name = "none")]
    Off,
    // One JSON object a line on standard error, once a second.
    Json,
}

/// What is shown, `auto` resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Off,
    Bar,
    Json,
}

static SHOWN: OnceLock<Shown> = OnceLock::new();

/// Fixes how progress is shown for the rest of the process, and has the volume crate's
/// KDF steps shown that way.
pub fn configure(mode: ProgressMode) {
    let shown = match mode {
        ProgressMode::Off => Shown::Off,
        ProgressMode::Json => Shown::Json,
        ProgressMode::Auto if std::io::stderr().is_terminal() => Shown::Bar,
        ProgressMode::Auto => Shown::Off,
    };
    let _ = SHOWN.set(shown);
    if shown != Shown::Off {
        sectorcrypt_volume::kdf::progress::set_observer(Box::new(on_kdf));
    }
}

fn shown() -> Shown {
    SHOWN.get().copied().unwrap_or(Shown::Off)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a progress counts.
enum Work {
    /// Bytes, of `total` when known.
    Bytes { total: Option<u64> },
    /// A KDF step: what it is (for people, and for JSON), and when it should end.
    Step {
        text: String,
        kdf: String,
        ends: Mutex<Option<Instant>>,
    },
}

/// The state the worker and the drawing thread share.
struct Live {
    op: &'static str,
    work: Work,
    done: AtomicU64,
    start: Instant,
    stopped: Mutex<bool>,
    wake: Condvar,
    /// The bar, when drawing on a terminal (JSON lines otherwise).
    bar: Option<ProgressBar>,
}

/// The progress of one piece of work. Dropped without [`Progress::finish`] (the work
/// failed), a bar stays as it was and JSON ends with `"finished": false`.
pub struct Progress {
    live: Option<Arc<Live>>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// The progress of `op` over bytes, `total` of them when known.
    pub fn bytes(op: &'static str, total: Option<u64>) -> Progress {
        Progress::start(op, Work::Bytes { total })
    }

    /// Counts `n` more bytes done.
    pub fn add(&self, n: u64) {
        if let Some(l) = &self.live {
            l.done.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Sets the bytes done to `done` (never backwards).
    pub fn set(&self, done: u64) {
        if let Some(l) = &self.live {
            l.done.fetch_max(done, Ordering::Relaxed);
        }
    }

    /// A KDF step, `expected` to take so long when known.
    fn step(step: KdfStep, expected: Option<Duration>) -> Progress {
        let (op, text, kdf) = match step {
            KdfStep::Calibrate { kind, target_ms } => (
                "calibrate",
                format!("calibrating {} to {target_ms} ms a derivation", kind.name()),
                kind.name().to_string(),
            ),
            KdfStep::Derive(k) => ("derive", format!("deriving the key ({k})"), k.to_string()),
        };
        let ends = Mutex::new(expected.map(|d| Instant::now() + d));
        Progress::start(op, Work::Step { text, kdf, ends })
    }

    /// The step under way should end in `left`.
    fn expect_left(&self, left: Duration) {
        if let Some(Live {
            work: Work::Step { ends, .. },
            ..
        }) = self.live.as_deref()
        {
            *lock(ends) = Some(Instant::now() + left);
        }
    }

    fn start(op: &'static str, work: Work) -> Progress {
        let shown = shown();
        if shown == Shown::Off {
            return Progress {
                live: None,
                ticker: None,
            };
        }
        let bar = (shown == Shown::Bar).then(|| new_bar(op, &work));
        let live = Arc::new(Live {
            op,
            work,
            done: AtomicU64::new(0),
            start: Instant::now(),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
            bar,
        });
        live.draw(None);
        let period = match shown {
            Shown::Json => Duration::from_secs(1),
            _ => Duration::from_millis(100),
        };
        let l = Arc::clone(&live);
        let ticker = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || l.tick_until_stopped(period))
            .ok();
        Progress {
            live: Some(live),
            ticker,
        }
    }

    /// The work is done: the final state is shown.
    pub fn finish(mut self) {
        self.end(true);
    }

    fn end(&mut self, finished: bool) {
        let Some(live) = self.live.take() else {
            return;
        };
        *lock(&live.stopped) = true;
        live.wake.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        live.draw(Some(finished));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.end(false);
    }
}

/// A line for `op` over `work`, drawn at most 10 times a second. The whole text is the
/// message (bar included), so that each frame is drawn from one consistent state.
fn new_bar(op: &'static str, work: &Work) -> ProgressBar {
    let template = match work {
        Work::Bytes { .. } => "{prefix} {msg}",
        Work::Step { .. } => "{prefix} {spinner} {msg}",
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .tick_chars("|/-\\ ");
    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10))
        .with_style(style)
        .with_prefix(op)
}

/// `[=====>    ]`: `done` of `total` in `width` characters.
fn bar_text(done: u64, total: u64, width: usize) -> String {
    let full = match total {
        0 => width,
        t => (done as u128 * width as u128 / t as u128) as usize,
    };
    let head = usize::from(full < width);
    format!(
        "[{}{}{}]",
        "=".repeat(full),
        ">".repeat(head),
        " ".repeat(width - full - head)
    )
}

/// `1.5s`, `2m03s`.
fn secs_text(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// `x` rounded to milliseconds (JSON numbers people can read).
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl Live {
    fn tick_until_stopped(&self, period: Duration) {
        let mut stopped = lock(&self.stopped);
        loop {
            let (s, _) = self
                .wake
                .wait_timeout_while(stopped, period, |s| !*s)
                .unwrap_or_else(|e| e.into_inner());
            stopped = s;
            if *stopped {
                return;
            }
            self.draw(None);
        }
    }

    /// The rate since the start (bytes a second) with `done` bytes done, and the time
    /// left when the total is known.
    fn rate(&self, done: u64, elapsed: Duration) -> (f64, Option<Duration>) {
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let left = match self.work {
            Work::Bytes { total: Some(t) } if rate > 0.0 => Some(Duration::from_secs_f64(
                t.saturating_sub(done) as f64 / rate,
            )),
            _ => None,
        };
        (rate, left)
    }

    /// The time left of a step, when known (none once past the expected end).
    fn step_left(&self) -> Option<Duration> {
        match &self.work {
            Work::Step { ends, .. } => {
                lock(ends).map(|e| e.saturating_duration_since(Instant::now()))
            }
            Work::Bytes { .. } => None,
        }
    }

    /// Shows the state now; `end`: the work ended, all done or not.
    fn draw(&self, end: Option<bool>) {
        let elapsed = self.start.elapsed();
        let mut done = self.done.load(Ordering::Relaxed);
        if let Work::Bytes { total: Some(t) } = self.work {
            // Finished, all is done; before, no more than all.
            done = if end == Some(true) { t } else { done.min(t) };
        }
        match &self.bar {
            Some(bar) => self.draw_bar(bar, done, elapsed, end),
            None => self.print_json(done, elapsed, end),
        }
    }

    fn draw_bar(&self, bar: &ProgressBar, done: u64, elapsed: Duration, end: Option<bool>) {
        match &self.work {
            Work::Bytes { total } => {
                let (rate, left) = self.rate(done, elapsed);
                let (bar_now, of) = match total {
                    Some(t) => (
                        format!("{} ", bar_text(done, *t, 24)),
                        format!(" / {}", HumanBytes(*t)),
                    ),
                    None => (String::new(), String::new()),
                };
                let text = format!(
                    "{bar_now}{}{of}  {}/s",
                    HumanBytes(done),
                    HumanBytes(rate as u64)
                );
                match end {
                    None => {
                        let left =
                            left.map_or(String::new(), |l| format!("  {} left", secs_text(l)));
                        bar.set_message(format!("{text}{left}"));
                    }
                    Some(finished) => {
                        let how = if finished { "done in" } else { "stopped after" };
                        let last = format!("{text}  {how} {}", secs_text(elapsed));
                        if finished {
                            bar.finish_with_message(last);
                        } else {
                            bar.abandon_with_message(last);
                        }
                        // The last state stays on its line; what follows goes below it.
                        eprintln!();
                    }
                }
            }
            Work::Step { text, .. } => match end {
                None => {
                    let left = self
                        .step_left()
                        .map_or(String::new(), |l| format!(", about {} left", secs_text(l)));
                    bar.set_message(format!("{text}: {}{left}", secs_text(elapsed)));
                    bar.tick();
                }
                // A step is a moment of a command: its line goes once it is over.
                Some(_) => bar.finish_and_clear(),
            },
        }
    }

    fn print_json(&self, done: u64, elapsed: Duration, end: Option<bool>) {
        let finished = end == Some(true);
        let mut line = json!({ "op": self.op });
        let eta = match &self.work {
            Work::Bytes { total } => {
                let (rate, left) = self.rate(done, elapsed);
                line["done"] = json!(done);
                line["total"] = json!(total);
                line["bytes_per_sec"] = json!(round3(rate));
                left
            }
            Work::Step { kdf, .. } => {
                line["kdf"] = json!(kdf);
                self.step_left()
            }
        };
        let eta = if finished { Some(Duration::ZERO) } else { eta };
        line["eta_secs"] = json!(eta.map(|d| round3(d.as_secs_f64())));
        line["elapsed_secs"] = json!(round3(elapsed.as_secs_f64()));
        line["finished"] = json!(finished);
        eprintln!("{line}");
    }
}

/// The KDF step under way, shown.
static STEP: Mutex<Option<Progress>> = Mutex::new(None);

/// The volume crate's observer: one progress per KDF step.
fn on_kdf(e: KdfEvent) {
    let mut step = lock(&STEP);
    match e {
        KdfEvent::Begin { step: s, expected } => {
            if let Some(p) = step.take() {
                p.finish();
            }
            *step = Some(Progress::step(s, expected));
        }
        KdfEvent::Left(d) => {
            if let Some(p) = step.as_ref() {
                p.expect_left(d);
            }
        }
        KdfEvent::End => {
            if let Some(p) = step.take() {
                p.finish();
            }
        }
    }
}
