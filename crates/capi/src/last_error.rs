//! The detail of the last failure on each thread, for `sectorcrypt_last_error`, and
//! [`guard`], which runs the body of every C entry point: it catches a panic before it can
//! cross into C (undefined behaviour there) and turns it into `SECTORCRYPT_ERR_INTERNAL`,
//! and it records the outcome, so that the detail always belongs to the thread's latest
//! call (empty after a success).

use crate::status::{Failure, Status};
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `body`, records its outcome for this thread and returns its status; a panic in
/// it becomes [`Status::ERR_INTERNAL`].
pub fn guard(body: impl FnOnce() -> Result<(), Failure>) -> Status {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Failure::new(
            Status::ERR_INTERNAL,
            format!("internal error (a panic in sectorcrypt): {what}"),
        ))
    });
    match outcome {
        Ok(()) => {
            set("");
            Status::OK
        }
        Err(f) => {
            set(&f.detail);
            f.status
        }
    }
}

/// Makes `detail` this thread's last-error text (a NUL inside it ends it early).
fn set(detail: &str) {
    let text = detail.split('\0').next().unwrap_or_default();
    let text = CString::new(text).unwrap_or_default();
    LAST.with(|last| *last.borrow_mut() = text);
}

/// This thread's last-error text: valid until the thread's next call into the library.
pub fn pointer() -> *const c_char {
    LAST.with(|last| last.borrow().as_ptr())
}

/// This thread's last-error text, copied (for tests).
pub fn text() -> String {
    LAST.with(|last| last.borrow().to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_and_a_success_clears_the_detail() {
        let status = guard(|| panic!("index {} out of range", 7));
        assert_eq!(status, Status::ERR_INTERNAL);
        assert!(text().contains("index 7 out of range"), "{}", text());
        assert_eq!(guard(|| Ok(())), Status::OK);
        assert_eq!(text(), "");
        let status = guard(|| Err(Failure::new(Status::ERR_IO, "disk.img: gone\0hidden")));
        assert_eq!(status, Status::ERR_IO);
        assert_eq!(text(), "disk.img: gone");
    }

    #[test]
    fn each_thread_keeps_its_own_detail() {
        guard(|| Err(Failure::invalid("this thread")));
        std::thread::spawn(|| {
            assert_eq!(text(), "");
            guard(|| Err(Failure::invalid("another thread")));
        })
        .join()
        .unwrap();
        assert_eq!(text(), "this thread");
    }
}
