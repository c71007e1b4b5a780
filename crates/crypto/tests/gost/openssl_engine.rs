//! OpenSSL gost engine (filled in later).
