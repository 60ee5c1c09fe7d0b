//! The capture filter of `pronghorn pcap`: a small subset of tcpdump's language, applied to
//! each frame. Primitives: `tcp`, `udp`, `icmp`, `icmp6`, `arp`, `ip`, `ip6`, `[src|dst] host
//! ADDR`, `[src|dst] port N`; combined with `and`/`&&`, `or`/`||`, `not`/`!` and parentheses.

use std::net::IpAddr;

use anyhow::{bail, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Any,
    Proto(Proto),
    Host(Side, IpAddr),
    Port(Side, u16),
    Not(Box<Filter>),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    Icmp6,
    Arp,
    Ip,
    Ip6,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Side {
    Src,
    Dst,
    Either,
}

/// What the filter looks at in a frame.
struct Parsed {
    ethertype: u16,
    proto: Option<u8>,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    ports: Option<(u16, u16)>,
}

fn parse_frame(f: &[u8]) -> Option<Parsed> {
    let ethertype = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let mut p = Parsed { ethertype, proto: None, src: None, dst: None, ports: None };
    let l4 = match ethertype {
        0x0800 => {
            let ip = f.get(14..34)?;
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            p.proto = Some(ip[9]);
            p.src = Some(IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).ok()?));
            p.dst = Some(IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).ok()?));
            // Only the first fragment carries the ports.
            let frag_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            (frag_offset == 0).then_some(14 + ihl)
        }
        0x86dd => {
            let ip = f.get(14..54)?;
            p.proto = Some(ip[6]);
            p.src = Some(IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?));
            p.dst = Some(IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?));
            Some(54)
        }
        _ => None,
    };
    if let (Some(at), Some(6 | 17)) = (l4, p.proto) {
        if let Some(h) = f.get(at..at + 4) {
            p.ports = Some((u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]])));
        }
    }
    Some(p)
}

impl Filter {
    pub fn matches(&self, frame: &[u8]) -> bool {
        match parse_frame(frame) {
            Some(p) => self.eval(&p),
            None => matches!(self, Filter::Any),
        }
    }

    fn eval(&self, p: &Parsed) -> bool {
        let side = |s: Side, a: Option<IpAddr>, b: Option<IpAddr>, want: IpAddr| match s {
            Side::Src => a == Some(want),
            Side::Dst => b == Some(want),
            Side::Either => a == Some(want) || b == Some(want),
        };
        match self {
            Filter::Any => true,
            Filter::Proto(proto) => match proto {
                Proto::Tcp => p.proto == Some(6),
                Proto::Udp => p.proto == Some(17),
                Proto::Icmp => p.ethertype == 0x0800 && p.proto == Some(1),
                Proto::Icmp6 => p.ethertype == 0x86dd && p.proto == Some(58),
                Proto::Arp => p.ethertype == 0x0806,
                Proto::Ip => p.ethertype == 0x0800,
                Proto::Ip6 => p.ethertype == 0x86dd,
            },
            Filter::Host(s, a) => side(*s, p.src, p.dst, *a),
            Filter::Port(s, port) => match (p.ports, s) {
                (Some((sp, _)), Side::Src) => sp == *port,
                (Some((_, dp)), Side::Dst) => dp == *port,
                (Some((sp, dp)), Side::Either) => sp == *port || dp == *port,
                (None, _) => false,
            },
            Filter::Not(f) => !f.eval(p),
            Filter::And(a, b) => a.eval(p) && b.eval(p),
            Filter::Or(a, b) => a.eval(p) || b.eval(p),
        }
    }

    /// Parses the words of a filter (empty: every frame).
    pub fn parse(words: &[String]) -> Result<Filter> {
        let text = words.join(" ").replace('(', " ( ").replace(')', " ) ").replace('!', " ! ");
        let tokens: Vec<&str> = text.split_whitespace().collect();
        if tokens.is_empty() {
            return Ok(Filter::Any);
        }
        let mut at = 0;
        let f = or(&tokens, &mut at)?;
        if at != tokens.len() {
            bail!("filter: unexpected '{}' (primitives: tcp udp icmp icmp6 arp ip ip6, [src|dst] host ADDR, [src|dst] port N; and or not, parentheses)", tokens[at]);
        }
        Ok(f)
    }
}

fn or(t: &[&str], at: &mut usize) -> Result<Filter> {
    let mut f = and(t, at)?;
    while matches!(t.get(*at), Some(&"or") | Some(&"||")) {
        *at += 1;
        f = Filter::Or(Box::new(f), Box::new(and(t, at)?));
    }
    Ok(f)
}

fn and(t: &[&str], at: &mut usize) -> Result<Filter> {
    let mut f = factor(t, at)?;
    // As in tcpdump, primitives side by side are joined by `and` ("tcp port 80").
    loop {
        match t.get(*at) {
            Some(&"and") | Some(&"&&") => *at += 1,
            None | Some(&"or") | Some(&"||") | Some(&")") => return Ok(f),
            Some(_) => {}
        }
        f = Filter::And(Box::new(f), Box::new(factor(t, at)?));
    }
}

fn factor(t: &[&str], at: &mut usize) -> Result<Filter> {
    let Some(&word) = t.get(*at) else { bail!("filter: ends where a primitive was expected") };
    *at += 1;
    let proto = |p| Ok(Filter::Proto(p));
    match word {
        "not" | "!" => Ok(Filter::Not(Box::new(factor(t, at)?))),
        "(" => {
            let f = or(t, at)?;
            if t.get(*at) != Some(&")") {
                bail!("filter: a '(' is not closed");
            }
            *at += 1;
            Ok(f)
        }
        "tcp" => proto(Proto::Tcp),
        "udp" => proto(Proto::Udp),
        "icmp" => proto(Proto::Icmp),
        "icmp6" => proto(Proto::Icmp6),
        "arp" => proto(Proto::Arp),
        "ip" => proto(Proto::Ip),
        "ip6" => proto(Proto::Ip6),
        "src" | "dst" => {
            let side = if word == "src" { Side::Src } else { Side::Dst };
            primitive(t, at, side)
        }
        "host" | "port" => {
            *at -= 1;
            primitive(t, at, Side::Either)
        }
        other => bail!("filter: unknown primitive '{other}' (tcp udp icmp icmp6 arp ip ip6, [src|dst] host ADDR, [src|dst] port N)"),
    }
}

fn primitive(t: &[&str], at: &mut usize, side: Side) -> Result<Filter> {
    let kind = t.get(*at).copied().unwrap_or("");
    let value = t.get(*at + 1).copied().unwrap_or("");
    *at += 2;
    match kind {
        "host" => match value.parse::<IpAddr>() {
            Ok(a) => Ok(Filter::Host(side, a)),
            Err(_) => bail!("filter: 'host' needs an IPv4 or IPv6 address, got '{value}'"),
        },
        "port" => match value.parse::<u16>() {
            Ok(p) => Ok(Filter::Port(side, p)),
            Err(_) => bail!("filter: 'port' needs a number 0 to 65535, got '{value}'"),
        },
        _ => bail!("filter: 'host' or 'port' expected, got '{kind}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    fn filter(s: &str) -> Filter {
        Filter::parse(&s.split(' ').map(String::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn primitives_and_combinations_select_as_tcpdump_does() {
        let f = ipv4_tcp([10, 99, 0, 2], [10, 99, 0, 1], 40000, 6379);
        for yes in [
            "",
            "tcp",
            "ip",
            "port 6379",
            "dst port 6379",
            "src port 40000",
            "host 10.99.0.2",
            "src host 10.99.0.2",
            "tcp and port 6379",
            "tcp port 6379",
            "udp or tcp",
            "not udp",
            "!arp && (port 1 || port 6379)",
        ] {
            assert!(filter(yes).matches(&f), "{yes}");
        }
        for no in
            ["udp", "ip6", "arp", "src port 6379", "dst host 10.99.0.2", "port 80", "not tcp", "tcp and not port 6379"]
        {
            assert!(!filter(no).matches(&f), "{no}");
        }
    }

    #[test]
    fn bad_filters_name_what_is_wrong() {
        let err = |s: &str| Filter::parse(&[s.to_string()]).unwrap_err().to_string();
        assert!(err("port http").contains("'port' needs a number"), "{}", err("port http"));
        assert!(err("host nowhere").contains("IPv4 or IPv6"));
        assert!(err("sctp").contains("unknown primitive 'sctp'"));
        assert!(err("(tcp").contains("not closed"));
        assert!(err("tcp )").contains("unexpected ')'"));
    }
}
