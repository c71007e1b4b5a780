//! The one file with `unsafe`: hand-written declarations of the few librados and librbd
//! calls used (Ceph 16's `rados/librados.h`, `rbd/librbd.h`) and [`Image`], a safe
//! owner of one open image with its cluster connection and pool context.
//!
//! Contract kept here so that nothing above needs `unsafe`:
//! - the three handles are created in order (cluster, pool context, image) and released in
//!   reverse order exactly once, by `Drop`, also when opening fails halfway;
//! - every C string passed is a `CString` that outlives the call (librados copies them);
//! - a data request borrows its buffer for the whole life of the librbd request: it is
//!   submitted with an aio call and waited for before the function returns, on every path
//!   (a failed submission has nothing in flight), so librbd never touches the buffer after
//!   the borrow ends; a started write instead owns its buffer (boxed with its callback,
//!   handed to librbd as the completion's argument) until librbd calls back, exactly once;
//! - writes are zero-copy (librbd references the caller's buffer rather than copying it):
//!   librbd then holds a write's completion back until it has released the buffer, so the
//!   above holds for them too;
//! - librbd's image handle is thread-safe (its `ImageCtx` locks internally; qemu issues
//!   aio from many threads on one handle), so [`Image`] is `Send + Sync` and requests from
//!   the engine's threads are in flight together.
#![allow(
    unsafe_code,
    reason = "FFI to librbd/librados: declarations and the calls behind the safe Image"
)]

use sectorcrypt_volume::WriteDone;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::ops::Range;
use std::ptr;

type RadosT = *mut c_void;
type IoCtxT = *mut c_void;
type ImageT = *mut c_void;
type CompletionT = *mut c_void;
type Callback = Option<unsafe extern "C" fn(CompletionT, *mut c_void)>;

/// `RBD_MAX_BLOCK_NAME_SIZE` and `RBD_MAX_IMAGE_NAME_SIZE` of librbd.h.
const MAX_BLOCK_NAME: usize = 24;
const MAX_IMAGE_NAME: usize = 96;

/// librbd.h's `rbd_image_info_t`.
#[repr(C)]
struct ImageInfo {
    size: u64,
    obj_size: u64,
    num_objs: u64,
    order: c_int,
    block_name_prefix: [c_char; MAX_BLOCK_NAME],
    parent_pool: i64,
    parent_name: [c_char; MAX_IMAGE_NAME],
}

#[link(name = "rados")]
extern "C" {
    fn rados_create(cluster: *mut RadosT, id: *const c_char) -> c_int;
    fn rados_conf_read_file(cluster: RadosT, path: *const c_char) -> c_int;
    fn rados_conf_set(cluster: RadosT, option: *const c_char, value: *const c_char) -> c_int;
    fn rados_conf_get(
        cluster: RadosT,
        option: *const c_char,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    fn rados_connect(cluster: RadosT) -> c_int;
    fn rados_shutdown(cluster: RadosT);
    fn rados_ioctx_create(cluster: RadosT, pool: *const c_char, ioctx: *mut IoCtxT) -> c_int;
    fn rados_ioctx_destroy(ioctx: IoCtxT);
    fn rados_ioctx_set_namespace(ioctx: IoCtxT, nspace: *const c_char);
}

#[link(name = "rbd")]
extern "C" {
    fn rbd_open(io: IoCtxT, name: *const c_char, image: *mut ImageT, snap: *const c_char) -> c_int;
    fn rbd_open_read_only(
        io: IoCtxT,
        name: *const c_char,
        image: *mut ImageT,
        snap: *const c_char,
    ) -> c_int;
    fn rbd_close(image: ImageT) -> c_int;
    fn rbd_stat(image: ImageT, info: *mut ImageInfo, infosize: usize) -> c_int;
    fn rbd_get_size(image: ImageT, size: *mut u64) -> c_int;
    fn rbd_aio_create_completion(arg: *mut c_void, cb: Callback, c: *mut CompletionT) -> c_int;
    fn rbd_aio_read(image: ImageT, off: u64, len: usize, buf: *mut c_char, c: CompletionT)
        -> c_int;
    fn rbd_aio_write(
        image: ImageT,
        off: u64,
        len: usize,
        buf: *const c_char,
        c: CompletionT,
    ) -> c_int;
    fn rbd_aio_discard(image: ImageT, off: u64, len: u64, c: CompletionT) -> c_int;
    fn rbd_aio_flush(image: ImageT, c: CompletionT) -> c_int;
    fn rbd_aio_wait_for_complete(c: CompletionT) -> c_int;
    fn rbd_aio_get_return_value(c: CompletionT) -> isize;
    fn rbd_aio_release(c: CompletionT);
}

/// A librados/librbd return code: negative errno on failure.
fn check(r: c_int, what: &str) -> io::Result<c_int> {
    if r < 0 {
        let e = io::Error::from_raw_os_error(-r);
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(r)
}

fn cstring(s: &str, what: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the {what} contains a NUL byte"),
        )
    })
}

/// Where and how to open an image.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub user: Option<&'a str>,
    pub conf: Option<&'a str>,
    pub options: &'a [(String, String)],
    pub pool: &'a str,
    pub namespace: Option<&'a str>,
    pub image: &'a str,
    pub snap: Option<&'a str>,
    pub read_only: bool,
}

/// One open RBD image with its own cluster connection and pool context.
#[derive(Debug)]
pub(crate) struct Image {
    cluster: RadosT,
    ioctx: IoCtxT,
    image: ImageT,
}

// SAFETY: the handles are plain pointers owned by this value; librados and librbd allow
// their use from any thread, and an image handle from many threads at once (see the module
// documentation). Drop runs once, after every borrow (and so every request) has ended.
unsafe impl Send for Image {}
// SAFETY: as for Send: every method takes `&self` and librbd synchronises internally.
unsafe impl Sync for Image {}

impl Drop for Image {
    fn drop(&mut self) {
        // SAFETY: each handle is either null (never created) or was created by the matching
        // call in `open` and not yet released; the image is closed before its pool
        // context, the context destroyed before the cluster is shut down.
        unsafe {
            if !self.image.is_null() {
                rbd_close(self.image);
            }
            if !self.ioctx.is_null() {
                rados_ioctx_destroy(self.ioctx);
            }
            if !self.cluster.is_null() {
                rados_shutdown(self.cluster);
            }
        }
    }
}

/// A completion created for one request; released when dropped.
struct Completion(CompletionT);

impl Completion {
    fn new() -> io::Result<Completion> {
        let mut c: CompletionT = ptr::null_mut();
        // SAFETY: `c` is a valid out-pointer; no callback (the caller waits instead).
        check(
            unsafe { rbd_aio_create_completion(ptr::null_mut(), None, &mut c) },
            "rbd_aio_create_completion",
        )?;
        Ok(Completion(c))
    }

    /// Waits for the request submitted with this completion; its return value.
    fn wait(&self) -> isize {
        // SAFETY: the completion is valid and a request was submitted with it.
        unsafe {
            rbd_aio_wait_for_complete(self.0);
            rbd_aio_get_return_value(self.0)
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // SAFETY: created by rbd_aio_create_completion; any request using it has completed
        // (waited for) or was never submitted.
        unsafe { rbd_aio_release(self.0) }
    }
}

/// A started write: its buffer, which is librbd's until the write is over, and what to call
/// then.
struct Started {
    buf: Vec<u8>,
    done: WriteDone,
}

/// librbd's callback for a started write, on one of librbd's threads: releases the
/// completion and gives the buffer back with the outcome.
unsafe extern "C" fn written(c: CompletionT, arg: *mut c_void) {
    // SAFETY: `arg` is the `Started` that `start_write` gave up for this completion, and
    // librbd calls back once per completion; the completion stays valid until released
    // here, after its value is read (releasing it in its own callback is allowed: qemu's
    // rbd driver does the same).
    let (started, r) = unsafe {
        let started = Box::from_raw(arg.cast::<Started>());
        let r = rbd_aio_get_return_value(c);
        rbd_aio_release(c);
        (started, r)
    };
    let Started { buf, done } = *started;
    done(buf, outcome(r, "writing").map(|_| ()));
}

/// A request's result: a negative errno, or the bytes done.
fn outcome(r: isize, what: &str) -> io::Result<usize> {
    if r < 0 {
        check(r as c_int, what)?;
    }
    Ok(r as usize)
}

impl Image {
    /// Connects to the cluster and opens the image: read-only when `t.read_only` (always
    /// for a snapshot).
    pub(crate) fn open(t: &Target<'_>) -> io::Result<Image> {
        let mut img = Image {
            cluster: ptr::null_mut(),
            ioctx: ptr::null_mut(),
            image: ptr::null_mut(),
        };
        let user = t.user.map(|u| cstring(u, "user")).transpose()?;
        // SAFETY: valid out-pointer; `user` is a C string or null (librados: "admin").
        check(
            unsafe {
                rados_create(
                    &mut img.cluster,
                    user.as_ref().map_or(ptr::null(), |u| u.as_ptr()),
                )
            },
            "rados_create",
        )?;
        // Give up connecting after 30 s rather than librados's 300 (an option may change it).
        img.conf_set("client_mount_timeout", "30")?;
        let conf = t.conf.map(|c| cstring(c, "conf path")).transpose()?;
        // SAFETY: the cluster handle is valid; the path is a C string, or null for the
        // default search ($CEPH_CONF, /etc/ceph/ceph.conf, ...).
        let r = unsafe {
            rados_conf_read_file(
                img.cluster,
                conf.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            )
        };
        if conf.is_some() {
            check(r, &format!("reading {}", t.conf.unwrap_or_default()))?;
        }
        // librbd's cache off, as qemu's rbd driver sets it for cache=none: a write is on the
        // OSDs when it is acknowledged (the default cache acknowledges up to
        // rbd_cache_max_dirty bytes early, and the NBD server's many writers then measured
        // a third to a whole slower, unevenly). The spec's `rbd_cache=true` turns it back on.
        img.conf_set("rbd_cache", "false")?;
        // Writes hand librbd the caller's buffer instead of a copy of it (librbd's default
        // copies). Safe by the borrow contract above: librbd holds the request's
        // completion back until it has released the buffer, and every write waits for its
        // completion before returning. With the cache on, librbd copies anyway.
        img.conf_set("rbd_disable_zero_copy_writes", "false")?;
        for (k, v) in t.options {
            img.conf_set(k, v)?;
        }
        // SAFETY: the cluster handle is valid and configured.
        check(
            unsafe { rados_connect(img.cluster) },
            "connecting to the cluster",
        )?;
        let pool = cstring(t.pool, "pool")?;
        // SAFETY: connected cluster, C string, valid out-pointer.
        check(
            unsafe { rados_ioctx_create(img.cluster, pool.as_ptr(), &mut img.ioctx) },
            &format!("opening pool {}", t.pool),
        )?;
        if let Some(ns) = t.namespace {
            let ns = cstring(ns, "namespace")?;
            // SAFETY: valid pool context; librados copies the name.
            unsafe { rados_ioctx_set_namespace(img.ioctx, ns.as_ptr()) };
        }
        let name = cstring(t.image, "image name")?;
        let snap = t.snap.map(|s| cstring(s, "snapshot")).transpose()?;
        let snap_ptr = snap.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        let open = if t.read_only {
            rbd_open_read_only
        } else {
            rbd_open
        };
        // SAFETY: valid pool context, C strings (or null for no snapshot), out-pointer.
        check(
            unsafe { open(img.ioctx, name.as_ptr(), &mut img.image, snap_ptr) },
            &format!("opening image {}", t.image),
        )?;
        Ok(img)
    }

    /// Sets a librados option; the copy of its value made here (it may be a cephx `key`)
    /// is wiped afterwards.
    fn conf_set(&self, key: &str, value: &str) -> io::Result<()> {
        let (k, v) = (cstring(key, "option")?, cstring(value, "option value")?);
        // SAFETY: valid cluster handle (not yet connected), C strings copied by librados.
        let r = unsafe { rados_conf_set(self.cluster, k.as_ptr(), v.as_ptr()) };
        zeroize::Zeroize::zeroize(&mut v.into_bytes_with_nul());
        check(r, &format!("option {key}"))?;
        Ok(())
    }

    /// The value librados holds for the option `key` (a name, never a secret: not `key`).
    pub(crate) fn conf_get(&self, key: &str) -> io::Result<String> {
        let k = cstring(key, "option")?;
        let mut buf = vec![0u8; 256];
        // SAFETY: valid cluster handle, a C string, and a buffer of `buf.len()` bytes that
        // librados fills with a NUL-terminated string (or fails with -ENAMETOOLONG).
        let r =
            unsafe { rados_conf_get(self.cluster, k.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        check(r, &format!("option {key}"))?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    /// The image's size in bytes (as of now: another client may resize it).
    pub(crate) fn size(&self) -> io::Result<u64> {
        let mut size = 0u64;
        // SAFETY: open image, valid out-pointer.
        check(
            unsafe { rbd_get_size(self.image, &mut size) },
            "rbd_get_size",
        )?;
        Ok(size)
    }

    /// The image's object size in bytes.
    pub(crate) fn object_size(&self) -> io::Result<u64> {
        let mut info = ImageInfo {
            size: 0,
            obj_size: 0,
            num_objs: 0,
            order: 0,
            block_name_prefix: [0; MAX_BLOCK_NAME],
            parent_pool: 0,
            parent_name: [0; MAX_IMAGE_NAME],
        };
        // SAFETY: open image; `info` is librbd.h's struct and its exact size is passed.
        check(
            unsafe { rbd_stat(self.image, &mut info, std::mem::size_of::<ImageInfo>()) },
            "rbd_stat",
        )?;
        Ok(info.obj_size)
    }

    /// Reads into `buf` at `off`; the bytes read (fewer only at the end of the image).
    pub(crate) fn read(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let c = Completion::new()?;
        // SAFETY: `buf` is valid for writes of its length and stays borrowed until `wait`
        // returns below; a failed submission leaves nothing in flight.
        let r = unsafe {
            rbd_aio_read(
                self.image,
                off,
                buf.len(),
                buf.as_mut_ptr().cast::<c_char>(),
                c.0,
            )
        };
        check(r, "rbd_aio_read")?;
        outcome(c.wait(), "reading")
    }

    /// Writes all of `buf` at `off` (librbd's aio writes complete whole or fail).
    pub(crate) fn write(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let c = Completion::new()?;
        // SAFETY: `buf` is valid for reads of its length and stays borrowed until `wait`
        // returns below; a failed submission leaves nothing in flight.
        let r = unsafe {
            rbd_aio_write(
                self.image,
                off,
                buf.len(),
                buf.as_ptr().cast::<c_char>(),
                c.0,
            )
        };
        check(r, "rbd_aio_write")?;
        outcome(c.wait(), "writing").map(|_| ())
    }

    /// Starts writing `buf[range]` at `off` and returns; librbd calls [`written`] when the
    /// write is over, which gives the buffer back to `done` with the outcome.
    pub(crate) fn start_write(&self, buf: Vec<u8>, range: Range<usize>, off: u64, done: WriteDone) {
        let started = Box::new(Started { buf, done });
        let (data, len) = (started.buf[range.clone()].as_ptr(), range.len());
        let arg = Box::into_raw(started);
        let mut c: CompletionT = ptr::null_mut();
        // SAFETY: a valid out-pointer; `written` takes `arg` back when librbd calls it.
        let mut r = unsafe { rbd_aio_create_completion(arg.cast(), Some(written), &mut c) };
        if r >= 0 {
            // SAFETY: `data..data + len` is inside the heap buffer of the `Vec` that `arg`
            // owns (boxing the `Vec` did not move its buffer), and nothing touches it until
            // librbd calls `written`, which it does only after letting go of the buffer.
            r = unsafe { rbd_aio_write(self.image, off, len, data.cast::<c_char>(), c) };
            if r < 0 {
                // SAFETY: created above, nothing in flight with it.
                unsafe { rbd_aio_release(c) };
            }
        }
        if r < 0 {
            // SAFETY: nothing was submitted, so no callback comes: `arg` is still ours.
            let Started { buf, done } = *unsafe { Box::from_raw(arg) };
            done(buf, check(r, "rbd_aio_write").map(|_| ()));
        }
    }

    /// Discards `len` bytes at `off` (they then read as zeros).
    pub(crate) fn discard(&self, off: u64, len: u64) -> io::Result<()> {
        let c = Completion::new()?;
        // SAFETY: open image, valid completion; no buffer involved.
        check(
            unsafe { rbd_aio_discard(self.image, off, len, c.0) },
            "rbd_aio_discard",
        )?;
        outcome(c.wait(), "discarding").map(|_| ())
    }

    /// Completes once every write acknowledged before it is on the OSDs.
    pub(crate) fn flush(&self) -> io::Result<()> {
        let c = Completion::new()?;
        // SAFETY: open image, valid completion; no buffer involved.
        check(unsafe { rbd_aio_flush(self.image, c.0) }, "rbd_aio_flush")?;
        outcome(c.wait(), "flushing").map(|_| ())
    }
}
