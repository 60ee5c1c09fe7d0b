//! The socket slab: every socket of the shard (connections, listeners, UDP sockets) in one
//! vector of slots, named by [`SocketId`] (index and generation, so a stale id finds nothing),
//! and the two lists of sockets that need attention: dirty (the shard has work for them: data
//! to send, events to report; `poll` drains it) and changed (their readiness may have changed;
//! the application drains it with [`Shard::take_changed`]).
//!
//! It owns slots and lists only: what a socket is and does is the protocol modules' business.

use nic::Nic;

use super::tcp::{Listener, TcpSocket};
use super::udp::UdpSocket;
use super::{Errno, Shard};

/// A socket of this shard. Stale ids (of a freed socket) are rejected with EBADF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId {
    pub(super) index: u32,
    pub(super) gen: u32,
    /// The shard of the process it belongs to (`ShardConfig::index`).
    pub(super) shard: u16,
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

/// What a slot holds.
pub(super) enum Socket {
    Tcp(Box<TcpSocket>),
    Listener(Listener),
    Udp(UdpSocket),
}

pub(super) struct Slot {
    pub(super) gen: u32,
    pub(super) socket: Option<Socket>,
    pub(super) dirty: bool,
    pub(super) changed: bool,
}

impl<N: Nic> Shard<N> {
    pub(super) fn alloc(&mut self, socket: Socket) -> SocketId {
        match self.free_slots.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.socket = Some(socket);
                SocketId { index, gen: slot.gen, shard: self.cfg.shard_index }
            }
            None => {
                self.slots.push(Slot { gen: 0, socket: Some(socket), dirty: false, changed: false });
                SocketId { index: (self.slots.len() - 1) as u32, gen: 0, shard: self.cfg.shard_index }
            }
        }
    }

    pub(super) fn take_socket(&mut self, id: SocketId) -> Option<Socket> {
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

    pub(super) fn socket(&self, id: SocketId) -> Option<&Socket> {
        debug_assert_eq!(id.shard, self.cfg.shard_index, "a socket of another shard");
        self.slots.get(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_ref())
    }

    pub(super) fn socket_mut(&mut self, id: SocketId) -> Option<&mut Socket> {
        debug_assert_eq!(id.shard, self.cfg.shard_index, "a socket of another shard");
        self.slots.get_mut(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_mut())
    }

    pub(super) fn mark_dirty(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen && !slot.dirty {
                slot.dirty = true;
                self.dirty.push(id);
            }
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

    pub(super) fn tcp(&mut self, id: SocketId) -> Result<&mut TcpSocket, Errno> {
        match self.socket_mut(id) {
            Some(Socket::Tcp(s)) => Ok(s),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }

    /// Sockets whose readiness may have changed since the last call (each once).
    pub fn take_changed(&mut self, out: &mut Vec<SocketId>) {
        for id in self.changed.drain(..) {
            if let Some(slot) = self.slots.get_mut(id.index as usize) {
                if slot.gen == id.gen {
                    slot.changed = false;
                    out.push(id);
                }
            }
        }
    }
}
