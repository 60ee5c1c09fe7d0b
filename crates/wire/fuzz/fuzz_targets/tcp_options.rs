//! Arbitrary bytes as a TCP option area: the option walk must end, never panic, and every option
//! it yields must survive emit and parse unchanged. Areas that fit a header (40 bytes or less)
//! also go through `TcpRepr::parse` inside a segment.
//!
//! Run from `crates/wire`: `cargo +nightly fuzz run tcp_options`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::tcp::{HEADER_LEN, MAX_OPTIONS_LEN};
use wire::*;

fuzz_target!(|data: &[u8]| {
    let _ = TcpOption::parse(data);

    let mut count = 0;
    for option in TcpOptions::new(data) {
        count += 1;
        // Every step consumes at least one byte.
        assert!(count <= data.len());
        let Ok(option) = option else { continue };
        let mut buf = vec![0u8; option.buffer_len()];
        assert!(option.emit(&mut buf).is_empty());
        let (again, rest) = TcpOption::parse(&buf).unwrap();
        assert_eq!(again, option);
        assert!(rest.is_empty() || option == TcpOption::EndOfList);
    }

    if data.len() <= MAX_OPTIONS_LEN {
        let header_len = HEADER_LEN + data.len().div_ceil(4) * 4;
        let mut segment = vec![0u8; header_len + 1];
        let mut packet = TcpPacket::new_unchecked(&mut segment[..]);
        packet.set_src_port(1);
        packet.set_dst_port(2);
        packet.set_header_len(header_len as u8);
        packet.options_mut()[..data.len()].copy_from_slice(data);
        let addr = IpAddress::V4(Ipv4Address::new(10, 0, 0, 1));
        let packet = TcpPacket::new_checked(&segment[..]).unwrap();
        let parsed = TcpRepr::parse(&packet, &addr, &addr, false);
        // The segment parses exactly when every option up to End of Option List does.
        let options_ok = TcpOptions::new(packet.options()).all(|o| o.is_ok());
        assert_eq!(parsed.is_ok(), options_ok);
        if let Ok(repr) = parsed {
            assert_eq!(repr.payload_len, 1);
        }
    }
});
