//! Keys out of reach for the commands that hold them: `serve` and `mount` make their
//! process non-dumpable before they read a passphrase (no core dump, and other processes
//! of the same user can neither ptrace it nor read its memory), and every command warns
//! once when the system did not let it lock its key memory (`RLIMIT_MEMLOCK`). The keys
//! themselves live in the crypto crate's secret memory (`sectorcrypt_crypto::secret`);
//! what unlocking left on the stack is zeroed once the volume is open.

use sectorcrypt_crypto::secret::{self, Protection};
use std::sync::Once;

/// For a process that holds keys for as long as it runs: no core dumps.
pub fn hold_keys_for_long() {
    if let Err(e) = secret::forbid_core_dumps() {
        eprintln!("sectorcrypt: warning: cannot turn core dumps off: {e}");
    }
}

/// After a volume was opened: zeroes the stack its unlocking used (the KDF's state, the
/// temporaries of the keys; the keys themselves are in secret memory).
pub fn scrub_after_unlock() {
    secret::scrub_stack(64 << 10);
}

/// Warns (once) if some key memory could not be locked (`mlock` refused: the keys may be
/// swapped out).
pub fn warn_if_key_memory_not_locked() {
    warn_through_if_key_memory_not_locked(&|w| eprintln!("sectorcrypt: warning: {w}"));
}

/// [`warn_if_key_memory_not_locked`], the warning given to `warn` (a gateway's log).
pub fn warn_through_if_key_memory_not_locked(warn: &dyn Fn(&str)) {
    static WARNED: Once = Once::new();
    if secret::protection() == Some(Protection::Unlocked) {
        WARNED.call_once(|| {
            warn(
                "key memory could not be locked (RLIMIT_MEMLOCK is too low: see ulimit -l); \
                 keys may be written to swap, though never to a core dump",
            )
        });
    }
}
