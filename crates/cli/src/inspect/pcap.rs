//! `pronghorn pcap`: frames captured at a process's shards into a pcapng file (tshark and
//! Wireshark read it): one interface per shard, nanosecond timestamps, the direction of each
//! frame in its flags. The process captures only while this runs.

use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::filter::Filter;
use super::{control, pick};

#[derive(Args)]
pub struct PcapArgs {
    /// The accelerated process (the only one, if not given; a number first is taken as the pid).
    #[arg(long, value_parser = super::parse_pid)]
    pid: Option<u32>,
    /// The pcapng file to write.
    #[arg(short = 'w', value_name = "FILE")]
    write: PathBuf,
    /// Stop after this many frames (that pass the filter); otherwise at Ctrl-C or SIGTERM.
    #[arg(short = 'c', value_name = "COUNT")]
    count: Option<u64>,
    /// Bytes kept of each frame.
    #[arg(short = 's', long, default_value_t = 262_144)]
    snaplen: u32,
    /// The process (optional) and the filter.
    #[arg(
        value_name = "[PID] FILTER",
        help = "[PID] and a filter in tcpdump's words (a subset: tcp udp icmp icmp6 arp ip ip6, \
                [src|dst] host ADDR, [src|dst] port N; and or not, parentheses)"
    )]
    filter: Vec<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// pcapng blocks (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-02.html>).
fn block(out: &mut impl Write, kind: u32, body: &[u8]) -> std::io::Result<()> {
    let len = (12 + body.len()) as u32;
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&len.to_le_bytes())
}

fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize(body.len().next_multiple_of(4), 0);
}

fn pad(body: &mut Vec<u8>) {
    body.resize(body.len().next_multiple_of(4), 0);
}

pub fn run(mut args: PcapArgs) -> Result<i32> {
    if args.pid.is_none() {
        if let Some(pid) = args.filter.first().and_then(|w| super::parse_pid(w).ok()) {
            args.pid = Some(pid);
            args.filter.remove(0);
        }
    }
    let filter = Filter::parse(&args.filter)?;
    anyhow::ensure!(args.snaplen >= 64, "--snaplen must be at least 64 bytes, got {}", args.snaplen);
    let p = pick(args.pid)?;
    let mut stream = control(p.pid, &format!("pcap {}", args.snaplen))?;
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).context("the process ended the capture before it began")?;
    if head[..4] == *b"erro" {
        let mut rest = String::new();
        let _ = stream.read_to_string(&mut rest);
        bail!("pid {}: {}{}", p.pid, String::from_utf8_lossy(&head), rest.trim());
    }
    if u32::from_le_bytes(head[..4].try_into().unwrap()) != runtime::observe::control::PCAP_MAGIC {
        bail!("pid {} answered the capture request with something else (another pronghorn version?)", p.pid);
    }
    let shards = u32::from_le_bytes(head[4..8].try_into().unwrap());
    let offset = i64::from_le_bytes(head[8..16].try_into().unwrap());

    let file = std::fs::File::create(&args.write).with_context(|| format!("cannot create {}", args.write.display()))?;
    let mut out = BufWriter::new(file);
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    option(&mut shb, 4, format!("pronghorn pcap of pid {} ({})", p.pid, p.command()).as_bytes());
    option(&mut shb, 0, &[]);
    block(&mut out, 0x0A0D_0D0A, &shb)?;
    for k in 0..shards {
        let mut idb = Vec::new();
        idb.extend_from_slice(&1u16.to_le_bytes()); // LINKTYPE_ETHERNET
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&args.snaplen.to_le_bytes());
        option(&mut idb, 2, format!("shard{k}").as_bytes()); // if_name
        option(&mut idb, 9, &[9]); // if_tsresol: nanoseconds
        option(&mut idb, 0, &[]);
        block(&mut out, 1, &idb)?;
    }

    unsafe {
        libc::signal(libc::SIGINT, stop as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, stop as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    // Reads wake up now and then to see whether a signal asked to stop.
    stream.set_read_timeout(Some(std::time::Duration::from_millis(200)))?;
    let (mut kept, mut dropped) = (0u64, 0u64);
    let mut record = [0u8; 24];
    let mut data = Vec::new();
    let limit = args.count.unwrap_or(u64::MAX);
    'capture: while !STOP.load(Ordering::Relaxed) && kept < limit {
        let mut have = 0;
        while have < record.len() {
            match stream.read(&mut record[have..]) {
                Ok(0) => break 'capture,
                Ok(n) => have += n,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    if STOP.load(Ordering::Relaxed) {
                        break 'capture;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let at_ns = u64::from_le_bytes(record[..8].try_into().unwrap());
        let shard = u32::from_le_bytes(record[8..12].try_into().unwrap());
        let direction = record[12];
        let len = u32::from_le_bytes(record[16..20].try_into().unwrap());
        let caplen = u32::from_le_bytes(record[20..24].try_into().unwrap()) as usize;
        if direction == 255 {
            dropped += u64::from(len);
            continue;
        }
        data.resize(caplen, 0);
        stream.set_read_timeout(None)?;
        stream.read_exact(&mut data)?;
        stream.set_read_timeout(Some(std::time::Duration::from_millis(200)))?;
        if !filter.matches(&data) {
            continue;
        }
        let ts = (at_ns as i64 + offset).max(0) as u64;
        let mut epb = Vec::with_capacity(32 + caplen);
        epb.extend_from_slice(&shard.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(caplen as u32).to_le_bytes());
        epb.extend_from_slice(&len.to_le_bytes());
        epb.extend_from_slice(&data);
        pad(&mut epb);
        // epb_flags: bits 0-1 are the direction, 1 inbound, 2 outbound.
        let flags: u32 = if direction == 0 { 1 } else { 2 };
        option(&mut epb, 2, &flags.to_le_bytes());
        option(&mut epb, 0, &[]);
        block(&mut out, 6, &epb)?;
        kept += 1;
    }
    drop(stream);
    out.flush()?;
    eprintln!(
        "{kept} frames captured to {}{}",
        args.write.display(),
        if dropped > 0 { format!(" ({dropped} dropped: the reader was too slow)") } else { String::new() }
    );
    Ok(0)
}
