//! The socket set: every socket of the shard (connections, listeners, UDP sockets) in one
//! vector of slots, named by [`SocketId`] (index and generation, so a stale id finds nothing),
//! and the two lists of sockets that need attention: dirty (the shard has work for them: data
//! to send, events to report; `poll` drains it) and changed (their readiness may have changed;
//! the application drains it with `Shard::take_changed`).
//!
//! It owns slots and lists only, and knows nothing of the shard: what a socket is and does (`T`,
//! the shard's `Socket`) is the protocol modules' business. A lookup borrows the set alone, so
//! the shard's other parts (the link, the timer wheel, the tables) stay usable while a socket
//! is held.

/// A socket of this shard. Stale ids (of a freed socket) are rejected with EBADF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId {
    index: u32,
    gen: u32,
    /// The shard of the process it belongs to (`ShardConfig::index`).
    shard: u16,
}

impl SocketId {
    /// The shard that holds this socket (0 unless the process runs several).
    pub fn shard(self) -> usize {
        self.shard as usize
    }

    /// The socket's slot: small and dense (freed slots are reused), so callers can keep
    /// per-socket state in a vector indexed by it and check the whole id on lookup.
    pub fn index(self) -> usize {
        self.index as usize
    }
}

struct Slot<T> {
    gen: u32,
    socket: Option<T>,
    dirty: bool,
    changed: bool,
}

/// The sockets of one shard and the lists of those that need attention.
pub(super) struct SocketSet<T> {
    slots: Vec<Slot<T>>,
    free_slots: Vec<u32>,
    dirty: Vec<SocketId>,
    changed: Vec<SocketId>,
    /// The shard's place in the process (`ShardConfig::shard_index`), in every id it makes.
    shard: u16,
}

impl<T> SocketSet<T> {
    pub(super) fn new(shard: u16) -> Self {
        SocketSet { slots: Vec::new(), free_slots: Vec::new(), dirty: Vec::new(), changed: Vec::new(), shard }
    }

    /// Sockets open.
    pub(super) fn len(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }

    pub(super) fn alloc(&mut self, socket: T) -> SocketId {
        match self.free_slots.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.socket = Some(socket);
                SocketId { index, gen: slot.gen, shard: self.shard }
            }
            None => {
                self.slots.push(Slot { gen: 0, socket: Some(socket), dirty: false, changed: false });
                SocketId { index: (self.slots.len() - 1) as u32, gen: 0, shard: self.shard }
            }
        }
    }

    /// Frees `id`'s slot (its id goes stale) and gives back what it held.
    pub(super) fn take(&mut self, id: SocketId) -> Option<T> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.gen != id.gen || slot.socket.is_none() {
            return None;
        }
        slot.gen = slot.gen.wrapping_add(1);
        slot.dirty = false;
        slot.changed = false;
        self.free_slots.push(id.index);
        slot.socket.take()
    }

    pub(super) fn get(&self, id: SocketId) -> Option<&T> {
        debug_assert_eq!(id.shard, self.shard, "a socket of another shard");
        self.slots.get(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_ref())
    }

    pub(super) fn get_mut(&mut self, id: SocketId) -> Option<&mut T> {
        debug_assert_eq!(id.shard, self.shard, "a socket of another shard");
        self.slots.get_mut(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_mut())
    }

    /// Every socket with its id, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (SocketId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, slot)| {
            let id = SocketId { index: i as u32, gen: slot.gen, shard: self.shard };
            slot.socket.as_ref().map(|s| (id, s))
        })
    }

    pub(super) fn mark_dirty(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen && !slot.dirty {
                slot.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    pub(super) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The dirty list, taken whole (servicing its sockets may mark others): each is unmarked
    /// ([`SocketSet::unmark_dirty`]) when its turn comes, so that it is not listed twice.
    pub(super) fn take_dirty(&mut self) -> Vec<SocketId> {
        std::mem::take(&mut self.dirty)
    }

    pub(super) fn unmark_dirty(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen {
                slot.dirty = false;
            }
        }
    }

    /// Gives back the (drained) vector `take_dirty` handed out, to keep its capacity, when
    /// nothing was marked meanwhile.
    pub(super) fn return_dirty(&mut self, spare: Vec<SocketId>) {
        if self.dirty.is_empty() {
            self.dirty = spare;
        }
    }

    pub(super) fn mark_changed(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen && !slot.changed {
                slot.changed = true;
                self.changed.push(id);
            }
        }
    }

    /// Sockets whose readiness may have changed since the last call (each once).
    pub(super) fn take_changed(&mut self, out: &mut Vec<SocketId>) {
        for id in self.changed.drain(..) {
            if let Some(slot) = self.slots.get_mut(id.index as usize) {
                if slot.gen == id.gen {
                    slot.changed = false;
                    out.push(id);
                }
            }
        }
    }

    /// The slab's memory (a test checks it lies in the family arena).
    #[cfg(test)]
    pub(super) fn slab_ptr(&self) -> *const u8 {
        self.slots.as_ptr().cast()
    }
}
