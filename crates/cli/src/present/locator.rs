//! The store locator of the library (`sectorcrypt_image::locator`), as the commands use
//! it: what an IMAGE or `--header` argument names, and how it is shown ([`redacted`]).

pub use sectorcrypt_image::locator::{locate, redacted, Location};
