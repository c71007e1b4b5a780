//! [`Secret`]: one value (an expanded key) in secret memory (see `pool.rs` and
//! `pages.rs`), like a `Box` whose memory is locked, kept out of core dumps and wiped when
//! dropped.
#![allow(unsafe_code)]

use super::pages::page_size;
use super::pool::Region;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// A value of type `T` in secret memory. The value is moved in once (its temporary on the
/// stack is the caller's to keep short-lived); on drop it is dropped in place and its
/// pages are wiped. `Debug` shows the type, never the value.
pub struct Secret<T> {
    region: Region,
    _value: PhantomData<T>,
}

// SAFETY: a `Secret<T>` owns its `T` as a `Box<T>` does.
unsafe impl<T: Send> Send for Secret<T> {}
// SAFETY: shared references give only `&T`.
unsafe impl<T: Sync> Sync for Secret<T> {}

impl<T> Secret<T> {
    /// Moves `value` into secret memory.
    pub fn new(value: T) -> Secret<T> {
        assert!(
            std::mem::align_of::<T>() <= page_size(),
            "alignment above the page size"
        );
        let region = Region::new(std::mem::size_of::<T>().max(1));
        // A slot is aligned to its size, a power of two at least `size_of::<T>()`, which
        // is a multiple of `align_of::<T>()`; pages are aligned to the page (checked above).
        assert!(region.start().cast::<T>().is_aligned());
        // SAFETY: the region is at least `size_of::<T>()` bytes, aligned for `T` (checked
        // above), writable and owned by us; nothing was there to drop.
        unsafe { region.start().cast::<T>().as_ptr().write(value) };
        Secret {
            region,
            _value: PhantomData,
        }
    }
}

impl<T> Deref for Secret<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the region holds the initialised `T` written by `new`, aligned, and
        // borrowed from `self`.
        unsafe { self.region.start().cast::<T>().as_ref() }
    }
}

impl<T> DerefMut for Secret<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { self.region.start().cast::<T>().as_mut() }
    }
}

impl<T> AsRef<T> for Secret<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T> Drop for Secret<T> {
    fn drop(&mut self) {
        // SAFETY: the `T` written by `new` is dropped once, here; the region (dropped
        // next) then wipes and unmaps its bytes.
        unsafe { std::ptr::drop_in_place(self.region.start().cast::<T>().as_ptr()) };
    }
}

impl<T: Clone> Clone for Secret<T> {
    fn clone(&self) -> Secret<T> {
        Secret::new((**self).clone())
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret<{}>(..)", std::any::type_name::<T>())
    }
}
