//! The `nbd_client` fuzz target's session against a real server, for capturing what the
//! server answers (`fuzz/seeds.sh` runs it through `fuzz/nbd-capture.py ... replies`):
//!
//!     cargo run -p sectorcrypt-fuzz --example nbd_client_session -- URI
//!
//! Prints how far the session got and what the handshake said.

fn main() -> std::io::Result<()> {
    let uri = std::env::args()
        .nth(1)
        .expect("usage: nbd_client_session URI");
    sectorcrypt_fuzz::client_session_against(&uri)
}
