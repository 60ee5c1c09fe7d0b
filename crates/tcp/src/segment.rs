//! Segments made from a few numbers rather than from a connection: a bare segment (no options,
//! no payload), the RST, and the reply to a segment that matches no connection (RFC 9293
//! 3.10.7.1). The connection, the TIME-WAIT entry, the stack and the test rigs all build their
//! RSTs and bare segments here. What it must not do: look at any connection's state (options,
//! windows and SACK blocks of a connection's own segments are the connection's output).

use wire::{TcpFlags, TcpRepr};

/// A segment from `src_port` to `dst_port` without options or payload. ACK is added to `flags`
/// when there is an `ack_number` (the wire writes it that way whatever the flags say).
pub fn bare_segment(
    src_port: u16,
    dst_port: u16,
    seq_number: u32,
    ack_number: Option<u32>,
    flags: TcpFlags,
    window_len: u16,
) -> TcpRepr {
    TcpRepr {
        src_port,
        dst_port,
        seq_number,
        ack_number,
        flags: if ack_number.is_some() { flags | TcpFlags::ACK } else { flags },
        window_len,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 4],
        timestamp: None,
        payload_len: 0,
        urgent_at: 0,
    }
}

/// A RST from `src_port` to `dst_port`: `<SEQ=seq><CTL=RST>`, or `<SEQ=seq><ACK=ack><CTL=RST,ACK>`
/// with an `ack`. No window, no options (Linux sends none on a RST either).
pub fn rst(src_port: u16, dst_port: u16, seq: u32, ack: Option<u32>) -> TcpRepr {
    bare_segment(src_port, dst_port, seq, ack, TcpFlags::RST, 0)
}

/// Whether a segment that matches no connection opens one at a listener (RFC 9293 3.10.7.2,
/// LISTEN, third check): a SYN without ACK and RST. One that also carries FIN is discarded, as
/// Linux's `tcp_rcv_state_process` discards it in TCP_LISTEN (SKB_DROP_REASON_TCP_FLAGS): no
/// legitimate open sets both, and answering it tells a scanner what listens.
pub fn opens_connection(seg: &TcpRepr) -> bool {
    seg.flags.contains(TcpFlags::SYN)
        && seg.ack_number.is_none()
        && !seg.flags.intersects(TcpFlags::RST | TcpFlags::FIN)
}

/// The reply to a segment that matches no connection (RFC 9293 3.10.7.1, state CLOSED): nothing
/// to a RST; otherwise a RST that the sender will accept: `<SEQ=SEG.ACK><CTL=RST>` if the segment
/// had an ACK, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
pub fn rst_for_unmatched(seg: &TcpRepr, payload_len: usize) -> Option<TcpRepr> {
    if seg.flags.contains(TcpFlags::RST) {
        return None;
    }
    let (seq, ack) = match seg.ack_number {
        Some(ack) => (ack, None),
        None => {
            let len = payload_len as u32
                + u32::from(seg.flags.contains(TcpFlags::SYN))
                + u32::from(seg.flags.contains(TcpFlags::FIN));
            (0, Some(seg.seq_number.wrapping_add(len)))
        }
    };
    Some(rst(seg.dst_port, seg.src_port, seq, ack))
}
