//! Which exports a client may see and use: the table the handshake consults
//! ([`Exports`]), what the server knows of the client asking ([`Peer`]), and the access
//! lists of one export ([`Access`]), with the table most servers want ([`ExportTable`]).
//!
//! A client names an export in NBD_OPT_INFO, NBD_OPT_GO or NBD_OPT_EXPORT_NAME and sees
//! the names NBD_OPT_LIST gives. An export a client may not use does not exist for it:
//! [`Exports::lookup`] answers `None` for an unknown name and for a refused one alike, and
//! [`Exports::list`] leaves the refused ones out, so a refused client learns nothing about
//! the names of exports it may not use. The empty name (the protocol's default export)
//! names the only export of a table that holds exactly one, and nothing otherwise.
//!
//! The access model: an export with no list admits every client that reaches the server;
//! one with lists admits a client that any list admits. Unix-socket clients are matched by
//! the credentials the kernel gave when they connected (`SO_PEERCRED`: user ID, and the
//! primary group ID only; supplementary groups are not known to the kernel's answer),
//! TLS clients by their certificate's subject (after STARTTLS, when the server verifies
//! client certificates), written as RFC 4514 writes a distinguished name (`CN=backup`,
//! `CN=web,O=Example\, Inc.,C=DE`: the last RDN first; the form `openssl x509 -noout
//! -subject -nameopt RFC2253` prints for the common attribute types).
//!
//! Pure: nothing here touches a socket; the server fills the [`Peer`] in.

use crate::export::Export;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// The credentials of a Unix-socket client, as the kernel gave them when it connected
/// (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    /// The effective user ID.
    pub uid: u32,
    /// The effective (primary) group ID.
    pub gid: u32,
    /// The process ID (for logs; a process ID is reused once the process exits, so no
    /// access depends on it).
    pub pid: i32,
}

/// What the server knows of a client: how it reached the server, and, once it started
/// TLS with a certificate the server verified, that certificate's subject.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peer {
    /// A Unix-socket client's credentials (`None` over TCP, or when the kernel did not
    /// say).
    pub credentials: Option<Credentials>,
    /// A TCP client's address.
    pub address: Option<SocketAddr>,
    /// The subject of the client's certificate, in RFC 4514 form, once TLS is up and the
    /// certificate was verified (`None` before TLS, without TLS, and when the server asks
    /// for no certificate).
    pub tls_subject: Option<String>,
}

impl Peer {
    /// A Unix-socket client with these credentials.
    pub fn unix(credentials: Option<Credentials>) -> Peer {
        Peer {
            credentials,
            ..Peer::default()
        }
    }

    /// A TCP client from `address`.
    pub fn tcp(address: SocketAddr) -> Peer {
        Peer {
            address: Some(address),
            ..Peer::default()
        }
    }

    /// The same client after TLS, its certificate's subject `subject`.
    pub fn with_tls_subject(self, subject: Option<String>) -> Peer {
        Peer {
            tls_subject: subject,
            ..self
        }
    }
}

impl fmt::Display for Peer {
    /// For log lines: `uid 1000 gid 1000 pid 42`, or the address, and the subject.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.credentials, &self.address) {
            (Some(c), _) => write!(f, "uid {} gid {} pid {}", c.uid, c.gid, c.pid)?,
            (None, Some(a)) => write!(f, "{a}")?,
            (None, None) => f.write_str("unknown peer")?,
        }
        if let Some(s) = &self.tls_subject {
            write!(f, " subject {s:?}")?;
        }
        Ok(())
    }
}

/// Which clients may see and use one export. Every list is optional; an export with no
/// list admits everyone, one with lists admits a client that any of them admits (a uid
/// or a gid or a subject).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Unix-socket clients by user ID.
    pub uids: Option<Vec<u32>>,
    /// Unix-socket clients by (primary) group ID.
    pub gids: Option<Vec<u32>>,
    /// TLS clients by their verified certificate's subject, compared as strings in the
    /// RFC 4514 form of [`Peer::tls_subject`].
    pub tls_subjects: Option<Vec<String>>,
}

impl Access {
    /// No list: every client that reaches the server.
    pub fn everyone() -> Access {
        Access::default()
    }

    /// Whether `peer` may see and use the export.
    pub fn admits(&self, peer: &Peer) -> bool {
        if self.uids.is_none() && self.gids.is_none() && self.tls_subjects.is_none() {
            return true;
        }
        let listed = |list: &Option<Vec<u32>>, id: Option<u32>| matches!((list, id), (Some(l), Some(id)) if l.contains(&id));
        let creds = peer.credentials;
        listed(&self.uids, creds.map(|c| c.uid))
            || listed(&self.gids, creds.map(|c| c.gid))
            || matches!(
                (&self.tls_subjects, &peer.tls_subject),
                (Some(l), Some(s)) if l.iter().any(|a| a == s)
            )
    }
}

/// One export as NBD_OPT_LIST shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Its name.
    pub name: String,
    /// Its description, if any (shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION).
    pub description: Option<String>,
}

/// One export a client asked for and may use.
#[derive(Clone)]
pub struct Found {
    /// Its name (the real one when the client asked for the default export, "").
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// What serves it.
    pub export: Arc<dyn Export>,
}

impl fmt::Debug for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Found")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// The exports a server offers, asked during each client's handshake. Implementations
/// decide per [`Peer`] what it may see; they are called from every connection's thread.
pub trait Exports: Send + Sync {
    /// The exports `peer` may see, in the order NBD_OPT_LIST gives them.
    fn list(&self, peer: &Peer) -> Vec<Listing>;

    /// The export `name` if `peer` may use it; `None` for an unknown name and for an
    /// export `peer` may not use alike (the client is told the same for both). `""` is
    /// the default export, if the table has one.
    fn lookup(&self, name: &str, peer: &Peer) -> Option<Found>;
}

/// One row of an [`ExportTable`].
struct Row {
    listing: Listing,
    export: Arc<dyn Export>,
    access: Access,
}

/// Exports by name, each with its access lists, listed in the order added. A table of
/// exactly one export also gives it for the default name `""` (to a client its lists
/// admit).
#[derive(Default)]
pub struct ExportTable {
    rows: Vec<Row>,
}

impl fmt::Debug for ExportTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.rows.iter().map(|r| (&r.listing.name, &r.access)))
            .finish()
    }
}

/// Why an export could not be added to an [`ExportTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// The name is empty (the empty name is the default export's, not a name of its own).
    EmptyName,
    /// The name is longer than an NBD string may be (4096 bytes).
    NameTooLong(usize),
    /// The table already has an export of this name.
    Duplicate(String),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::EmptyName => f.write_str("an export needs a name (\"\" is the default)"),
            TableError::NameTooLong(n) => {
                write!(f, "export name of {n} bytes: NBD allows at most {MAX_NAME}")
            }
            TableError::Duplicate(n) => write!(f, "two exports named {n:?}"),
        }
    }
}

impl std::error::Error for TableError {}

/// The longest name an NBD string holds.
const MAX_NAME: usize = 4096;

impl ExportTable {
    /// An empty table.
    pub fn new() -> ExportTable {
        ExportTable::default()
    }

    /// A table of one export, which everyone may use, under `name` (which may be empty:
    /// a server of one export answers to "" whatever its name).
    pub fn single(name: &str, description: Option<String>, export: Arc<dyn Export>) -> ExportTable {
        ExportTable {
            rows: vec![Row {
                listing: Listing {
                    name: name.to_string(),
                    description,
                },
                export,
                access: Access::everyone(),
            }],
        }
    }

    /// Adds `export` as `name`, for the clients `access` admits.
    pub fn add(
        &mut self,
        name: &str,
        description: Option<String>,
        export: Arc<dyn Export>,
        access: Access,
    ) -> Result<(), TableError> {
        if name.is_empty() {
            return Err(TableError::EmptyName);
        }
        if name.len() > MAX_NAME {
            return Err(TableError::NameTooLong(name.len()));
        }
        if self.rows.iter().any(|r| r.listing.name == name) {
            return Err(TableError::Duplicate(name.to_string()));
        }
        self.rows.push(Row {
            listing: Listing {
                name: name.to_string(),
                description,
            },
            export,
            access,
        });
        Ok(())
    }

    /// How many exports the table holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table holds no export.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Exports for ExportTable {
    fn list(&self, peer: &Peer) -> Vec<Listing> {
        self.rows
            .iter()
            .filter(|r| r.access.admits(peer))
            .map(|r| r.listing.clone())
            .collect()
    }

    fn lookup(&self, name: &str, peer: &Peer) -> Option<Found> {
        let row = match (name, &self.rows[..]) {
            ("", [only]) => only,
            ("", _) => return None,
            _ => self.rows.iter().find(|r| r.listing.name == name)?,
        };
        row.access.admits(peer).then(|| Found {
            name: row.listing.name.clone(),
            description: row.listing.description.clone(),
            export: row.export.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    struct Nothing;

    impl Export for Nothing {
        fn size(&self) -> u64 {
            0
        }
        fn preferred_block_size(&self) -> u32 {
            512
        }
        fn read_only(&self) -> bool {
            true
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            unreachable!()
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            unreachable!()
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    fn unix(uid: u32, gid: u32) -> Peer {
        Peer::unix(Some(Credentials { uid, gid, pid: 1 }))
    }

    fn names(l: Vec<Listing>) -> Vec<String> {
        l.into_iter().map(|l| l.name).collect()
    }

    #[test]
    fn any_list_admits_and_no_list_admits_everyone() {
        let everyone = Access::everyone();
        assert!(everyone.admits(&Peer::default()));
        assert!(everyone.admits(&unix(1000, 1000)));
        let uids = Access {
            uids: Some(vec![1000]),
            ..Access::default()
        };
        assert!(uids.admits(&unix(1000, 5)));
        assert!(!uids.admits(&unix(1001, 1000)));
        assert!(!uids.admits(&Peer::tcp("127.0.0.1:1".parse().unwrap())));
        let gids_or_subject = Access {
            gids: Some(vec![50]),
            tls_subjects: Some(vec!["CN=backup".into()]),
            ..Access::default()
        };
        assert!(gids_or_subject.admits(&unix(7, 50)));
        assert!(!gids_or_subject.admits(&unix(50, 7)));
        let tls = |s: &str| Peer::default().with_tls_subject(Some(s.into()));
        assert!(gids_or_subject.admits(&tls("CN=backup")));
        assert!(!gids_or_subject.admits(&tls("CN=backup2")));
        assert!(!gids_or_subject.admits(&tls("cn=backup")));
        // An empty list admits no one (it is a list, unlike no list).
        let none = Access {
            uids: Some(vec![]),
            ..Access::default()
        };
        assert!(!none.admits(&unix(0, 0)));
    }

    #[test]
    fn a_refused_export_is_neither_listed_nor_found_and_looks_unknown() {
        let mut t = ExportTable::new();
        let only_1000 = Access {
            uids: Some(vec![1000]),
            ..Access::default()
        };
        t.add("a", None, Arc::new(Nothing), Access::everyone())
            .unwrap();
        t.add("b", Some("bee".into()), Arc::new(Nothing), only_1000)
            .unwrap();
        t.add("c", None, Arc::new(Nothing), Access::everyone())
            .unwrap();
        assert_eq!(names(t.list(&unix(1000, 1))), ["a", "b", "c"]);
        assert_eq!(names(t.list(&unix(1001, 1))), ["a", "c"]);
        let found = t.lookup("b", &unix(1000, 1)).unwrap();
        assert_eq!(
            (found.name.as_str(), found.description.as_deref()),
            ("b", Some("bee"))
        );
        assert!(t.lookup("b", &unix(1001, 1)).is_none());
        assert!(t.lookup("nope", &unix(1000, 1)).is_none());
        // Several exports: no default.
        assert!(t.lookup("", &unix(1000, 1)).is_none());
    }

    #[test]
    fn a_table_of_one_answers_to_the_empty_name_for_whom_it_admits() {
        let t = ExportTable::single("vol", None, Arc::new(Nothing));
        assert_eq!(t.lookup("", &Peer::default()).unwrap().name, "vol");
        let mut t = ExportTable::new();
        let only_0 = Access {
            uids: Some(vec![0]),
            ..Access::default()
        };
        t.add("x", None, Arc::new(Nothing), only_0).unwrap();
        assert_eq!(t.lookup("", &unix(0, 0)).unwrap().name, "x");
        assert!(t.lookup("", &unix(1, 1)).is_none());
    }

    #[test]
    fn names_must_be_unique_non_empty_and_fit_an_nbd_string() {
        let mut t = ExportTable::new();
        t.add("a", None, Arc::new(Nothing), Access::everyone())
            .unwrap();
        assert_eq!(
            t.add("a", None, Arc::new(Nothing), Access::everyone()),
            Err(TableError::Duplicate("a".into()))
        );
        assert_eq!(
            t.add("", None, Arc::new(Nothing), Access::everyone()),
            Err(TableError::EmptyName)
        );
        let long = "x".repeat(MAX_NAME + 1);
        assert_eq!(
            t.add(&long, None, Arc::new(Nothing), Access::everyone()),
            Err(TableError::NameTooLong(MAX_NAME + 1))
        );
        assert_eq!(t.len(), 1);
    }
}
