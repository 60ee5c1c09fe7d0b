//! What a NIC with transmit offloads does to a frame, in software, for [`crate::mem`]: it
//! finishes the IPv4 header checksum and the TCP or UDP checksum from the pseudo-header sum the
//! stack left in the field (as a NIC given DPDK's `RTE_MBUF_F_TX_*_CKSUM` does), and it cuts a
//! frame marked for TCP segmentation into MSS-sized segments as a NIC given
//! `RTE_MBUF_F_TX_TCP_SEG` does: the headers copied into each piece, the IPv4 identification
//! counted up, the IP lengths, sequence numbers and checksums of each piece, CWR on the first
//! piece only, FIN and PSH on the last only. A stack that breaks the contract (a wrong seed in
//! the checksum field, a header length that does not match) gets wrong frames, as it would from
//! hardware.

use nic::Segmentation;
use wire::checksum;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
/// TCP flags cleared on all pieces but the last (FIN, PSH) and all but the first (CWR).
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Finishes the checksums of a frame the stack left to the NIC: the IPv4 header's, computed
/// afresh, and a TCP or UDP one from the pseudo-header sum in its field. Frames of other
/// protocols (ICMP, ARP, NDP: always the stack's) and too short to parse pass unchanged.
pub fn finish_checksums(frame: &mut [u8]) {
    let Some((l3, l4, proto)) = layers(frame) else { return };
    if u16_at(frame, 12) == ETHERTYPE_IPV4 {
        set_u16(frame, l3 + 10, 0);
        let sum = !checksum::data(&frame[l3..l4]);
        set_u16(frame, l3 + 10, sum);
    }
    let field = match proto {
        PROTO_TCP => 16,
        PROTO_UDP => 6,
        _ => return,
    };
    if frame.len() < l4 + field + 2 {
        return;
    }
    // The field holds the pseudo-header sum: summing the segment over it gives the checksum.
    let mut sum = !checksum::data(&frame[l4..]);
    if proto == PROTO_UDP && sum == 0 {
        sum = 0xffff;
    }
    set_u16(frame, l4 + field, sum);
}

/// Where the IP header and the transport header start, and the transport protocol, of an IPv4
/// or IPv6 frame (no IPv6 extension headers: the stack sends none).
fn layers(frame: &[u8]) -> Option<(usize, usize, u8)> {
    let l3 = 14;
    match u16_at(frame.get(..14)?, 12) {
        ETHERTYPE_IPV4 if frame.len() >= l3 + 20 => Some((l3, l3 + usize::from(frame[l3] & 0x0f) * 4, frame[l3 + 9])),
        ETHERTYPE_IPV6 if frame.len() >= l3 + 40 => Some((l3, l3 + 40, frame[l3 + 6])),
        _ => None,
    }
}

/// Cuts a TCP frame into segments of at most `seg.mss` payload bytes, each written by `piece`
/// (headers and payload, checksums finished). The frame's TCP checksum field holds the
/// pseudo-header sum without the length.
pub fn segment(frame: &[u8], seg: Segmentation, mut piece: impl FnMut(&[u8])) {
    let l3 = usize::from(seg.l2_len);
    let l4 = l3 + usize::from(seg.l3_len);
    let hdr = l4 + usize::from(seg.l4_len);
    let mss = usize::from(seg.mss).max(1);
    let payload = &frame[hdr.min(frame.len())..];
    let seed = u16_at(frame, l4 + 16);
    let seq0 = u32::from_be_bytes(frame[l4 + 4..l4 + 8].try_into().unwrap());
    let flags = frame[l4 + 13];
    let ip_id = if seg.ipv4 { u16_at(frame, l3 + 4) } else { 0 };
    let n = payload.len().div_ceil(mss).max(1);
    let mut out = Vec::with_capacity(hdr + mss);
    for (i, chunk) in payload.chunks(mss).chain((payload.is_empty()).then_some(&[][..])).enumerate() {
        out.clear();
        out.extend_from_slice(&frame[..hdr]);
        out.extend_from_slice(chunk);
        let l4_len = seg.l4_len as usize + chunk.len();
        if seg.ipv4 {
            set_u16(&mut out, l3 + 2, (usize::from(seg.l3_len) + l4_len) as u16);
            set_u16(&mut out, l3 + 4, ip_id.wrapping_add(i as u16));
            set_u16(&mut out, l3 + 10, 0);
            let sum = !checksum::data(&out[l3..l4]);
            set_u16(&mut out, l3 + 10, sum);
        } else {
            set_u16(&mut out, l3 + 4, l4_len as u16);
        }
        out[l4 + 4..l4 + 8].copy_from_slice(&seq0.wrapping_add((i * mss) as u32).to_be_bytes());
        let mut f = flags;
        if i + 1 < n {
            f &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            f &= !TCP_CWR;
        }
        out[l4 + 13] = f;
        set_u16(&mut out, l4 + 16, seed);
        let sum = !checksum::combine(&[checksum::data(&out[l4..]), l4_len as u16]);
        set_u16(&mut out, l4 + 16, sum);
        piece(&out);
    }
}

#[cfg(test)]
mod tests {
    use wire::{IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv6Address, Ipv6Packet, TcpFlags, TcpPacket, TcpRepr};

    use super::*;
    use crate::fuzzing::ip_frame;

    /// A frame of `len` payload bytes marked for segmentation, with timestamps and `flags`.
    fn frame(v4: bool, len: usize, flags: TcpFlags) -> (Vec<u8>, Vec<u8>, Segmentation) {
        let addrs = if v4 {
            (IpAddress::V4(Ipv4Address::new(10, 0, 0, 1)), IpAddress::V4(Ipv4Address::new(10, 0, 0, 2)))
        } else {
            (
                IpAddress::V6(Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                IpAddress::V6(Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
            )
        };
        let repr = TcpRepr {
            timestamp: Some((7, 9)),
            ..tcp::bare_segment(80, 4000, 0xffff_ff00, Some(5), flags | TcpFlags::ACK, 512)
        };
        let payload: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut f = ip_frame([2; 6], [4; 6], addrs, &repr, &payload, 0);
        let l3_len = if v4 { 20 } else { 40 };
        let l4 = 14 + l3_len;
        if v4 {
            set_u16(&mut f, 14 + 4, 0xfffe); // the id, to see it wrap
            set_u16(&mut f, 14 + 10, 0); // left to the NIC
        }
        let seed = checksum::pseudo_header(&addrs.0, &addrs.1, IpProtocol::Tcp, 0);
        set_u16(&mut f, l4 + 16, seed);
        let seg =
            Segmentation { l2_len: 14, l3_len: l3_len as u16, l4_len: repr.header_len() as u16, mss: 0, ipv4: v4 };
        (f, payload, seg)
    }

    /// Segments a frame of `len` bytes at `mss` and checks every piece as a receiver would.
    fn check(v4: bool, len: usize, mss: u16, flags: TcpFlags) {
        let (f, payload, seg) = frame(v4, len, flags);
        let seg = Segmentation { mss, ..seg };
        let mut pieces = Vec::new();
        segment(&f, seg, |p| pieces.push(p.to_vec()));
        let n = len.div_ceil(usize::from(mss));
        assert_eq!(pieces.len(), n, "{len} bytes at MSS {mss}");
        let mut got = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            let (src, dst, l4): (IpAddress, IpAddress, &[u8]) = if v4 {
                let ip = Ipv4Packet::new_checked(&p[14..]).unwrap();
                assert!(ip.verify_checksum(), "piece {i}: IPv4 checksum");
                assert_eq!(usize::from(ip.total_len()), p.len() - 14);
                assert_eq!(ip.ident(), 0xfffeu16.wrapping_add(i as u16));
                (ip.src_addr().into(), ip.dst_addr().into(), &p[34..])
            } else {
                let ip = Ipv6Packet::new_checked(&p[14..]).unwrap();
                assert_eq!(usize::from(ip.payload_len()), p.len() - 54);
                (ip.src_addr().into(), ip.dst_addr().into(), &p[54..])
            };
            let tcp = TcpPacket::new_checked(l4).unwrap();
            assert!(tcp.verify_checksum(&src, &dst), "piece {i} of {len} at MSS {mss}: TCP checksum");
            assert_eq!(tcp.seq_number(), 0xffff_ff00u32.wrapping_add((i * usize::from(mss)) as u32));
            let last = i + 1 == n;
            let has = |f: TcpFlags| tcp.flags().contains(f);
            assert_eq!(has(TcpFlags::FIN), last && flags.contains(TcpFlags::FIN), "piece {i}: FIN");
            assert_eq!(has(TcpFlags::PSH), last && flags.contains(TcpFlags::PSH), "piece {i}: PSH");
            assert_eq!(has(TcpFlags::CWR), i == 0 && flags.contains(TcpFlags::CWR), "piece {i}: CWR");
            let repr = TcpRepr::parse(&tcp, &src, &dst, true).unwrap();
            assert_eq!(repr.timestamp, Some((7, 9)), "piece {i}: options copied");
            assert!(tcp.payload().len() <= usize::from(mss));
            got.extend_from_slice(tcp.payload());
        }
        assert_eq!(got, payload);
    }

    #[test]
    fn every_size_at_every_small_mss_both_families() {
        for v4 in [true, false] {
            for mss in 1..=13u16 {
                for len in 1..=120 {
                    check(v4, len, mss, TcpFlags::PSH | TcpFlags::FIN | TcpFlags::CWR);
                }
            }
        }
    }

    #[test]
    fn real_sizes_up_to_64_kib() {
        for (v4, mss) in [(true, 1448u16), (true, 536), (false, 1428), (true, 1460)] {
            let most = nic::TSO_MAX_FRAME - 14 - if v4 { 20 } else { 40 } - 32;
            let m = usize::from(mss);
            for len in [1, m - 1, m, m + 1, 2 * m, 2 * m + 1, (45 * m).min(most), most - 1, most] {
                check(v4, len, mss, TcpFlags::PSH);
                check(v4, len, mss, TcpFlags::empty());
            }
        }
    }

    #[test]
    fn checksums_are_finished_from_the_pseudo_header_sum() {
        let (mut f, _, _) = frame(true, 100, TcpFlags::PSH);
        let l4_len = (f.len() - 34) as u32;
        let seed = checksum::pseudo_header(
            &IpAddress::V4(Ipv4Address::new(10, 0, 0, 1)),
            &IpAddress::V4(Ipv4Address::new(10, 0, 0, 2)),
            IpProtocol::Tcp,
            l4_len,
        );
        set_u16(&mut f, 34 + 16, seed);
        finish_checksums(&mut f);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(tcp.verify_checksum(&ip.src_addr().into(), &ip.dst_addr().into()));
    }
}
