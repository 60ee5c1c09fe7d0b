//! A set of one-bit facts in one byte, named by a fieldless enum of the part that keeps it:
//! what a part holds instead of a row of `bool`s (a `bool` takes a byte). It knows nothing of
//! what the bits mean.

use core::fmt;
use core::marker::PhantomData;

/// One fact of a [`Bits`] set: a variant of a fieldless enum of at most 8 variants.
pub(super) trait Bit: Copy {
    /// The bit's position, 0 to 7.
    fn index(self) -> u8;
}

/// A set of `B`s.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Bits<B>(u8, PhantomData<B>);

impl<B> Default for Bits<B> {
    fn default() -> Self {
        Bits(0, PhantomData)
    }
}

impl<B> fmt::Debug for Bits<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bits({:#010b})", self.0)
    }
}

impl<B: Bit> Bits<B> {
    fn mask(bit: B) -> u8 {
        debug_assert!(bit.index() < 8);
        1 << bit.index()
    }

    pub(super) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(super) fn has(self, bit: B) -> bool {
        self.0 & Self::mask(bit) != 0
    }

    pub(super) fn insert(&mut self, bit: B) {
        self.0 |= Self::mask(bit);
    }

    pub(super) fn remove(&mut self, bit: B) {
        self.0 &= !Self::mask(bit);
    }

    pub(super) fn set(&mut self, bit: B, on: bool) {
        self.0 = (self.0 & !Self::mask(bit)) | (u8::from(on) << bit.index());
    }

    /// Whether `bit` was set; it is clear afterwards.
    pub(super) fn take(&mut self, bit: B) -> bool {
        let was = self.has(bit);
        self.remove(bit);
        was
    }
}
