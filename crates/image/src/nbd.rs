//! A backing store on an NBD export: the volume crate's [`Store`] over the NBD crate's
//! client. Reads and writes go out as NBD requests (cut to the server's maximum block
//! size, all in flight at once), `sync` is NBD_CMD_FLUSH acknowledged only after the
//! server acknowledged it, a FUA write is NBD_CMD_WRITE with NBD_CMD_FLAG_FUA (or writes
//! and a flush where the server has no FUA), `discard` is NBD_CMD_TRIM when the server
//! takes it. Nothing is cached: the bytes handed to the engine are the server's, or an
//! error.

use sectorcrypt_nbd::client::{Client, ClientConfig, NbdUri};
use sectorcrypt_volume::Store;
use std::io;

/// An NBD export as a store.
#[derive(Debug)]
pub struct NbdStore {
    client: Client,
}

impl NbdStore {
    /// Connects to the export `uri` names.
    pub fn connect(uri: &NbdUri, config: ClientConfig) -> io::Result<NbdStore> {
        Ok(NbdStore {
            client: Client::connect(uri, config)?,
        })
    }

    /// Whether the server refuses writes.
    pub fn read_only(&self) -> bool {
        self.client.facts().read_only()
    }

    /// The export's URI, canonical.
    pub fn key(&self) -> &str {
        self.client.name()
    }
}

impl Store for NbdStore {
    fn name(&self) -> &str {
        self.client.name()
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.client.size())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.client.read_at(buf, offset)
    }

    /// A read that goes out as one request lands straight in `buf` (no copy).
    fn read_owned(
        &self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> (Vec<u8>, io::Result<()>) {
        self.client.read_owned(buf, range, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.client.write_at(buf, offset, false)
    }

    fn sync(&self) -> io::Result<()> {
        self.client.flush()
    }

    /// NBD_CMD_WRITE with NBD_CMD_FLAG_FUA on every piece when the server advertises FUA;
    /// otherwise the writes and then NBD_CMD_FLUSH. Acknowledged after the server's.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.client.write_at(buf, offset, true)
    }

    fn can_fua(&self) -> bool {
        self.client.facts().can_fua()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.client.trim(offset, len)
    }
}
