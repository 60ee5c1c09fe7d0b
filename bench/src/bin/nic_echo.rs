//! `nic-echo`: frames echoed through a NIC backend, in packets per second.
//!
//! One side (the generator) transmits numbered frames, keeping a window of them in flight; the
//! other (the reflector) sends every frame straight back with the MAC addresses swapped. The
//! generator checks each echo (addresses, ethertype, sequence number, every payload byte) and
//! counts round trips; each round trip is two frames through the backend.
//!
//! Modes:
//! - `mem`: both sides in one thread over the in-memory pair (`testkit::mem::pair`): the cost of the
//!   NIC layer itself, the ceiling the other backends are compared to;
//! - `reflect`: the reflector alone on a DPDK port, busy polling until SIGINT/SIGTERM; prints
//!   `ready` once the port is up and its counters on exit;
//! - `generate`: the generator alone on a DPDK port, against a reflector on the other end of the
//!   link. Frames can be lost there: a gap in the sequence numbers counts the skipped frames as
//!   lost, and when nothing comes back for 50 ms every frame in flight is counted lost and the
//!   window refilled, so a run always ends (after 20 such timeouts in a row, 1 s of silence, it
//!   fails: the reflector is gone). Before the run, a probe goes out (to the broadcast address)
//!   every 10 ms until one is echoed, for at most 5 s; its echo names the reflector's MAC.
//!
//! The frame: Ethernet header (destination, source, ethertype 0x88b5, "local experimental"), then
//! a 4-byte run tag, a kind byte (data or probe), 3 zero bytes, the sequence number (8 bytes, big
//! endian) and a fill pattern derived from the sequence number up to `--size` bytes.
//!
//! In the DPDK modes, everything DPDK and its drivers print goes to stderr: stdout carries only
//! this program's lines (`ready`, the result), so `--json` output can be read by a script as is.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use nic::dpdk::{DpdkNic, DpdkOptions, Pmd};
use nic::{MacAddr, Nic, NicStats, PacketBuf};
use testkit::mem::{pair, MemConfig, ETH_HEADER_LEN};

/// IEEE 802 "local experimental ethertype 1".
const ETHERTYPE: u16 = 0x88b5;
const OFF_TAG: usize = ETH_HEADER_LEN;
const OFF_KIND: usize = OFF_TAG + 4;
const OFF_SEQ: usize = OFF_KIND + 4;
/// Header bytes before the fill pattern.
const HEADER: usize = OFF_SEQ + 8;
const KIND_DATA: u8 = 0;
const KIND_PROBE: u8 = 1;
/// The smallest Ethernet frame without its FCS.
const MIN_FRAME: usize = 60;
const BROADCAST: MacAddr = MacAddr([0xff; 6]);

const RX_BURST: usize = 64;
/// Frames the reflector keeps waiting for room in the tx queue before it drops the overflow.
const REFLECT_TX_HOLD: usize = 1024;
/// With nothing received for this long, every frame in flight is counted lost.
const LOSS_TIMEOUT: Duration = Duration::from_millis(50);
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Loss timeouts in a row (no echo at all in between) after which the peer is taken for gone.
const MAX_SILENT_TIMEOUTS: u32 = 20;

#[derive(Parser)]
#[command(name = "nic-echo", about = "Frames echoed through a pronghorn NIC backend, in packets per second")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Generator and reflector in one thread over the in-memory pair.
    Mem(LoadArgs),
    /// Echo every frame received on a DPDK port back, MACs swapped, until SIGINT/SIGTERM.
    Reflect(ReflectArgs),
    /// Run the windowed ping-pong on a DPDK port against `nic-echo reflect` on the peer.
    Generate(GenerateArgs),
}

#[derive(Args)]
struct LoadArgs {
    /// Round trips to run [default: 2000000 for mem, 500000 for generate].
    #[arg(long)]
    frames: Option<u64>,
    /// Frames in flight.
    #[arg(long, default_value_t = 32)]
    window: usize,
    /// Frame size in bytes, Ethernet header included, FCS not.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Print one JSON object instead of a human line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PortArgs {
    /// The DPDK poll-mode driver: af_xdp or af_packet.
    #[arg(long, value_parser = parse_pmd)]
    pmd: Pmd,
    /// The Linux interface the PMD attaches to.
    #[arg(long)]
    iface: String,
    /// An extra EAL argument (repeat for several), e.g. --eal-arg=--no-huge.
    #[arg(long = "eal-arg", allow_hyphen_values = true)]
    eal_args: Vec<String>,
}

#[derive(Args)]
struct ReflectArgs {
    #[command(flatten)]
    port: PortArgs,
    /// Print the exit counters as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct GenerateArgs {
    #[command(flatten)]
    port: PortArgs,
    #[command(flatten)]
    load: LoadArgs,
}

fn parse_pmd(s: &str) -> Result<Pmd, String> {
    s.parse()
}

fn main() {
    let cli = Cli::parse();
    install_stop_handler();
    let result = match cli.mode {
        Mode::Mem(a) => run_mem(&a),
        Mode::Reflect(a) => run_reflect(&a),
        Mode::Generate(a) => run_generate(&a),
    };
    if let Err(e) = result {
        eprintln!("nic-echo: {e:#}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Signals and stdout.

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_stop_handler() {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Where this program's own lines go: stdout, which in the DPDK modes is a private copy of it,
/// fd 1 itself being pointed at stderr so that DPDK's log (it prints to stdout) stays out of it.
struct Out(File);

impl Out {
    fn take_stdout() -> Result<Out> {
        std::io::stdout().flush()?;
        let fd: OwnedFd = std::io::stdout().as_fd().try_clone_to_owned().context("dup stdout")?;
        if unsafe { libc::dup2(2, 1) } < 0 {
            bail!("cannot point fd 1 at stderr: {}", std::io::Error::last_os_error());
        }
        Ok(Out(File::from(fd)))
    }

    fn line(&mut self, s: &str) -> Result<()> {
        let mut text = String::with_capacity(s.len() + 1);
        text.push_str(s);
        text.push('\n');
        self.0.write_all(text.as_bytes()).context("write stdout")?;
        self.0.flush().context("flush stdout")
    }
}

// ---------------------------------------------------------------------------------------------
// Frames.

fn fill_byte(seq: u64, i: usize) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(i as u8)
}

fn write_frame(f: &mut [u8], dst: MacAddr, src: MacAddr, tag: u32, kind: u8, seq: u64) {
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[OFF_TAG..OFF_TAG + 4].copy_from_slice(&tag.to_be_bytes());
    f[OFF_KIND] = kind;
    f[OFF_KIND + 1..OFF_SEQ].fill(0);
    f[OFF_SEQ..OFF_SEQ + 8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[HEADER..].iter_mut().enumerate() {
        *b = fill_byte(seq, i);
    }
}

/// What came back.
enum Echo {
    /// A data frame of this run, intact, with this sequence number.
    Data(u64),
    /// A probe of this run, echoed by the peer with this MAC.
    Probe(MacAddr),
    /// Not ours (another ethertype, another run's tag): ignored.
    Foreign,
    /// Ours, but damaged: an error.
    Corrupt,
}

/// Who talks to whom in a run.
#[derive(Clone, Copy)]
struct Ends {
    me: MacAddr,
    peer: MacAddr,
    tag: u32,
}

fn classify(f: &[u8], ends: &Ends, size: usize) -> Echo {
    if f.len() < HEADER || f[12..14] != ETHERTYPE.to_be_bytes() || f[OFF_TAG..OFF_TAG + 4] != ends.tag.to_be_bytes() {
        return Echo::Foreign;
    }
    let dst = &f[0..6];
    let src = &f[6..12];
    if f[OFF_KIND] == KIND_PROBE {
        return if dst == ends.me.0 { Echo::Probe(MacAddr(src.try_into().unwrap())) } else { Echo::Corrupt };
    }
    let seq = u64::from_be_bytes(f[OFF_SEQ..OFF_SEQ + 8].try_into().unwrap());
    let intact = f[OFF_KIND] == KIND_DATA
        && f.len() == size
        && dst == ends.me.0
        && src == ends.peer.0
        && f[OFF_KIND + 1..OFF_SEQ].iter().all(|&b| b == 0)
        && f[HEADER..].iter().enumerate().all(|(i, &b)| b == fill_byte(seq, i));
    if intact {
        Echo::Data(seq)
    } else {
        Echo::Corrupt
    }
}

// ---------------------------------------------------------------------------------------------
// The two sides.

/// The echoing side: every frame back to its sender, from this port's MAC (a MAC swap for a
/// frame addressed to us). Frames that carry our own source MAC are not echoed (no loops).
struct Reflector<B> {
    rx: Vec<B>,
    tx: Vec<B>,
    counters: ReflectCounters,
}

#[derive(Clone, Copy, Debug, Default)]
struct ReflectCounters {
    received: u64,
    echoed: u64,
    ignored: u64,
    tx_dropped: u64,
}

impl<B: PacketBuf> Reflector<B> {
    fn new() -> Self {
        Self {
            rx: Vec::with_capacity(RX_BURST),
            tx: Vec::with_capacity(REFLECT_TX_HOLD + RX_BURST),
            counters: ReflectCounters::default(),
        }
    }

    /// One poll: receive a burst, echo it. Returns the frames received.
    #[inline]
    fn step<N: Nic<Buf = B>>(&mut self, nic: &mut N, me: MacAddr) -> usize {
        let n = nic.rx_burst(&mut self.rx, RX_BURST);
        for mut b in self.rx.drain(..) {
            let f = b.data_mut();
            if f.len() < ETH_HEADER_LEN || f[6..12] == me.0 {
                self.counters.ignored += 1;
                continue;
            }
            let (dst, rest) = f.split_at_mut(6);
            dst.copy_from_slice(&rest[..6]);
            rest[..6].copy_from_slice(&me.0);
            self.tx.push(b);
        }
        self.counters.received += n as u64;
        if !self.tx.is_empty() {
            self.counters.echoed += nic.tx_burst(&mut self.tx) as u64;
            if self.tx.len() > REFLECT_TX_HOLD {
                self.counters.tx_dropped += self.tx.len() as u64;
                self.tx.clear();
            }
        }
        n
    }
}

struct Load {
    frames: u64,
    window: usize,
    size: usize,
}

#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    round_trips: u64,
    /// Frames that did not come back: skipped over by a later sequence number, or still in flight
    /// when nothing had come back for 50 ms.
    lost: u64,
    /// Echoes of frames already counted lost (or duplicates).
    late: u64,
    /// Damaged echoes, echoes of frames never sent; on a lossless backend also any loss.
    errors: u64,
    /// Frames that were not ours, and late probe echoes.
    stray: u64,
    /// How often the 50 ms loss timeout fired.
    timeouts: u64,
    seconds: f64,
}

/// The generating side: `load.frames` numbered frames, `load.window` in flight, each echo checked.
/// `pump` runs once per poll (the in-memory reflector; nothing on a real port). On a `lossless`
/// backend every gap is also an error.
fn ping_pong<N: Nic>(nic: &mut N, ends: &Ends, load: &Load, lossless: bool, mut pump: impl FnMut()) -> Result<Tally> {
    let mut t = Tally::default();
    let mut txq: Vec<N::Buf> = Vec::with_capacity(load.window);
    let mut rxv: Vec<N::Buf> = Vec::with_capacity(RX_BURST);
    let window = load.window as u64;
    // Sequence numbers: [next_exp, seq_next) are in flight, the last txq.len() of them not yet
    // handed to the NIC.
    let mut seq_next: u64 = 0;
    let mut next_exp: u64 = 0;
    let mut idle: u32 = 0;
    let mut idle_since = Instant::now();
    let mut silent_timeouts: u32 = 0;
    let start = Instant::now();
    loop {
        while seq_next < load.frames && seq_next - next_exp < window {
            let Some(mut b) = nic.alloc() else {
                if seq_next == next_exp {
                    bail!("the buffer pool is empty with no frame in flight (a leak?)");
                }
                break;
            };
            b.set_len(load.size);
            write_frame(b.data_mut(), ends.peer, ends.me, ends.tag, KIND_DATA, seq_next);
            txq.push(b);
            seq_next += 1;
        }
        if !txq.is_empty() {
            nic.tx_burst(&mut txq);
        }
        pump();
        let got = nic.rx_burst(&mut rxv, RX_BURST);
        let handed = seq_next - txq.len() as u64;
        for b in rxv.drain(..) {
            match classify(b.data(), ends, load.size) {
                Echo::Data(s) if s == next_exp => {
                    t.round_trips += 1;
                    next_exp += 1;
                }
                Echo::Data(s) if s > next_exp && s < handed => {
                    // The frames before it went missing (the link keeps frames in order).
                    t.lost += s - next_exp;
                    if lossless {
                        t.errors += s - next_exp;
                    }
                    t.round_trips += 1;
                    next_exp = s + 1;
                }
                Echo::Data(s) if s < next_exp => {
                    t.late += 1;
                    if lossless {
                        t.errors += 1;
                    }
                }
                Echo::Data(_) | Echo::Corrupt => t.errors += 1,
                Echo::Probe(_) | Echo::Foreign => t.stray += 1,
            }
        }
        if seq_next == load.frames && next_exp == seq_next {
            break;
        }
        if got > 0 {
            idle = 0;
            silent_timeouts = 0;
            continue;
        }
        if idle == 0 {
            idle_since = Instant::now();
        }
        idle += 1;
        if idle & 63 == 0 {
            if stopped() {
                bail!("interrupted");
            }
            if idle_since.elapsed() >= LOSS_TIMEOUT {
                let outstanding = seq_next - next_exp;
                t.lost += outstanding;
                if lossless {
                    t.errors += outstanding;
                }
                t.timeouts += 1;
                txq.clear();
                next_exp = seq_next;
                idle = 0;
                silent_timeouts += 1;
                if silent_timeouts >= MAX_SILENT_TIMEOUTS {
                    bail!(
                        "nothing came back for {} ms ({} round trips done, {} frames lost): the peer stopped echoing",
                        MAX_SILENT_TIMEOUTS as u128 * LOSS_TIMEOUT.as_millis(),
                        t.round_trips,
                        t.lost
                    );
                }
            }
        }
    }
    t.seconds = start.elapsed().as_secs_f64();
    Ok(t)
}

fn validate(load: &Load, mtu: u16) -> Result<()> {
    if load.window == 0 {
        bail!("--window must be at least 1");
    }
    if load.frames == 0 {
        bail!("--frames must be at least 1");
    }
    let max = mtu as usize + ETH_HEADER_LEN;
    if load.size < MIN_FRAME || load.size > max {
        bail!("--size {} out of range: {MIN_FRAME} to {max} bytes (the MTU {mtu} plus the Ethernet header)", load.size);
    }
    Ok(())
}

fn run_tag() -> u32 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
}

// ---------------------------------------------------------------------------------------------
// Modes.

fn run_mem(a: &LoadArgs) -> Result<()> {
    let cfg = MemConfig::default();
    let load = Load { frames: a.frames.unwrap_or(2_000_000), window: a.window, size: a.size };
    validate(&load, cfg.mtu)?;
    let (mut na, mut nb) = pair(cfg);
    let ends = Ends { me: na.mac(), peer: nb.mac(), tag: run_tag() };
    let me_b = nb.mac();
    let mut reflector = Reflector::new();
    let t = ping_pong(&mut na, &ends, &load, true, || {
        reflector.step(&mut nb, me_b);
    })?;
    let r = reflector.counters;
    drop(reflector);
    if na.pool_available() != na.pool_size() {
        bail!("buffers leaked: {} of {} back in A's pool", na.pool_available(), na.pool_size());
    }
    let line = report("mem", &load, &t, None, a.json);
    println!("{line}");
    if !a.json {
        eprintln!(
            "reflector (B): received {}, echoed {}, ignored {}, tx dropped {}",
            r.received, r.echoed, r.ignored, r.tx_dropped
        );
    }
    Ok(())
}

fn open_port(p: &PortArgs) -> Result<DpdkNic> {
    let mut opts = DpdkOptions::new(p.pmd.clone(), p.iface.clone());
    opts.eal_args = p.eal_args.clone();
    let nic = DpdkNic::open(&opts).with_context(|| format!("cannot open {} on {}", p.pmd, p.iface))?;
    // The port is started; give the link a moment to report up (a veth is up at once).
    let deadline = Instant::now() + Duration::from_secs(2);
    while !nic.link().up && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let link = nic.link();
    eprintln!(
        "nic-echo: {} on {}: port {}, mac {}, mtu {}, link {} ({} Mbit/s), rx interrupt fd {:?}, {} mbufs free",
        p.pmd,
        p.iface,
        nic.port_id(),
        nic.mac(),
        nic.mtu(),
        if link.up { "up" } else { "DOWN" },
        link.speed_mbps,
        nic.rx_interrupt_fd(),
        nic.pool_available()
    );
    Ok(nic)
}

fn run_reflect(a: &ReflectArgs) -> Result<()> {
    let mut out = Out::take_stdout()?;
    let mut nic = open_port(&a.port)?;
    let me = nic.mac();
    out.line("ready")?;
    let counters = {
        let mut r = Reflector::new();
        while !stopped() {
            r.step(&mut nic, me);
        }
        r.counters
        // Every mbuf goes back to the pool here, before the port is closed.
    };
    let s = nic.stats();
    let line = if a.json {
        format!(
            "{{\"mode\":\"reflect\",\"backend\":{},\"iface\":{},\"received\":{},\"echoed\":{},\"ignored\":{},\"tx_dropped\":{},\"nic\":{}}}",
            jstr(&a.port.pmd.to_string()),
            jstr(&a.port.iface),
            counters.received,
            counters.echoed,
            counters.ignored,
            counters.tx_dropped,
            stats_json(&s)
        )
    } else {
        format!(
            "reflect {} on {}: received {}, echoed {}, ignored {}, tx dropped {}; port: {}",
            a.port.pmd,
            a.port.iface,
            counters.received,
            counters.echoed,
            counters.ignored,
            counters.tx_dropped,
            stats_human(&s)
        )
    };
    out.line(&line)?;
    drop(nic);
    Ok(())
}

fn run_generate(a: &GenerateArgs) -> Result<()> {
    let mut out = Out::take_stdout()?;
    let mut nic = open_port(&a.port)?;
    let load = Load { frames: a.load.frames.unwrap_or(500_000), window: a.load.window, size: a.load.size };
    validate(&load, nic.mtu())?;
    let mut ends = Ends { me: nic.mac(), peer: BROADCAST, tag: run_tag() };
    ends.peer = find_peer(&mut nic, &ends, load.size, &a.port.iface)?;
    eprintln!("nic-echo: the reflector answers from {}", ends.peer);
    let t = ping_pong(&mut nic, &ends, &load, false, || {})?;
    let s = nic.stats();
    let line = report(&a.port.pmd.to_string(), &load, &t, Some(&s), a.load.json);
    out.line(&line)?;
    drop(nic);
    Ok(())
}

/// Sends a probe (to the broadcast address) every 10 ms until one comes back; returns the MAC of
/// the peer that echoed it.
fn find_peer(nic: &mut DpdkNic, ends: &Ends, size: usize, iface: &str) -> Result<MacAddr> {
    let start = Instant::now();
    let mut next_probe = start;
    let mut rx = Vec::with_capacity(RX_BURST);
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        if now >= next_probe {
            if now - start >= PROBE_TIMEOUT {
                bail!(
                    "no echo came back on {iface} within {} s: is `nic-echo reflect` running on the other end of the link, \
                     and are both ends up?",
                    PROBE_TIMEOUT.as_secs()
                );
            }
            if stopped() {
                bail!("interrupted");
            }
            if let Some(mut b) = nic.alloc() {
                b.set_len(size);
                write_frame(b.data_mut(), BROADCAST, ends.me, ends.tag, KIND_PROBE, seq);
                let mut v = vec![b];
                nic.tx_burst(&mut v);
            }
            seq += 1;
            next_probe = now + PROBE_INTERVAL;
        }
        nic.rx_burst(&mut rx, RX_BURST);
        let mut found = None;
        for b in rx.drain(..) {
            if let Echo::Probe(peer) = classify(b.data(), ends, size) {
                found = Some(peer);
            }
        }
        if let Some(peer) = found {
            return Ok(peer);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Output.

fn report(backend: &str, load: &Load, t: &Tally, nic: Option<&NicStats>, json: bool) -> String {
    let rtps = t.round_trips as f64 / t.seconds;
    let fps = 2.0 * rtps;
    if json {
        let mut s = format!(
            "{{\"backend\":{},\"frames\":{},\"window\":{},\"size\":{},\"seconds\":{:.6},\"round_trips\":{},\
             \"round_trips_per_s\":{:.1},\"frames_per_s\":{:.1},\"lost\":{},\"late\":{},\"errors\":{},\"stray\":{},\"timeouts\":{}",
            jstr(backend),
            load.frames,
            load.window,
            load.size,
            t.seconds,
            t.round_trips,
            rtps,
            fps,
            t.lost,
            t.late,
            t.errors,
            t.stray,
            t.timeouts
        );
        if let Some(n) = nic {
            let _ = write!(s, ",\"nic\":{}", stats_json(n));
        }
        s.push('}');
        s
    } else {
        let mut s = format!(
            "{backend}: {} round trips of {} B frames, window {}, in {:.3} s: {:.3} M round trips/s, {:.3} Mpps echoed frames; \
             lost {}, late {}, errors {}, stray {}",
            t.round_trips,
            load.size,
            load.window,
            t.seconds,
            rtps / 1e6,
            fps / 1e6,
            t.lost,
            t.late,
            t.errors,
            t.stray
        );
        if let Some(n) = nic {
            let _ = write!(s, "; port: {}", stats_human(n));
        }
        s
    }
}

fn stats_json(s: &NicStats) -> String {
    format!(
        "{{\"ipackets\":{},\"opackets\":{},\"ibytes\":{},\"obytes\":{},\"imissed\":{},\"ierrors\":{},\"oerrors\":{}}}",
        s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors
    )
}

fn stats_human(s: &NicStats) -> String {
    format!(
        "ipackets {}, opackets {}, imissed {}, ierrors {}, oerrors {}",
        s.ipackets, s.opackets, s.imissed, s.ierrors, s.oerrors
    )
}

/// A JSON string literal.
fn jstr(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    #[test]
    fn a_frame_reflected_classifies_as_its_sequence_number() {
        let ends = Ends { me: A, peer: B, tag: 7 };
        let mut f = vec![0u8; 64];
        write_frame(&mut f, B, A, 7, KIND_DATA, 12345);
        // What the reflector does.
        let (dst, rest) = f.split_at_mut(6);
        dst.copy_from_slice(&rest[..6]);
        rest[..6].copy_from_slice(&B.0);
        assert!(matches!(classify(&f, &ends, 64), Echo::Data(12345)));
        // One flipped payload bit is caught.
        f[50] ^= 1;
        assert!(matches!(classify(&f, &ends, 64), Echo::Corrupt));
        // Another run's frame is not ours.
        let other = Ends { tag: 8, ..ends };
        assert!(matches!(classify(&f, &other, 64), Echo::Foreign));
    }

    #[test]
    fn mem_ping_pong_is_exact() {
        let (mut na, mut nb) = pair(MemConfig::default());
        let ends = Ends { me: na.mac(), peer: nb.mac(), tag: 1 };
        let me_b = nb.mac();
        let mut r = Reflector::new();
        let load = Load { frames: 10_000, window: 32, size: 64 };
        let t = ping_pong(&mut na, &ends, &load, true, || {
            r.step(&mut nb, me_b);
        })
        .unwrap();
        assert_eq!((t.round_trips, t.lost, t.late, t.errors, t.stray), (10_000, 0, 0, 0, 0));
        assert_eq!(r.counters.echoed, 10_000);
        drop(r);
        assert_eq!(na.pool_available(), na.pool_size());
    }

    #[test]
    fn lost_frames_are_counted_and_the_run_ends() {
        // A reflector that drops every 10th frame.
        let (mut na, mut nb) = pair(MemConfig::default());
        let ends = Ends { me: na.mac(), peer: nb.mac(), tag: 1 };
        let me_b = nb.mac();
        let mut n = 0u64;
        let mut dropped = 0u64;
        let load = Load { frames: 1000, window: 8, size: 64 };
        let t = ping_pong(&mut na, &ends, &load, false, || {
            let mut v = Vec::new();
            nb.rx_burst(&mut v, 64);
            let mut keep = Vec::new();
            for mut b in v {
                n += 1;
                if n == 10 {
                    n = 0;
                    dropped += 1;
                    continue;
                }
                let f = b.data_mut();
                let (dst, rest) = f.split_at_mut(6);
                dst.copy_from_slice(&rest[..6]);
                rest[..6].copy_from_slice(&me_b.0);
                keep.push(b);
            }
            nb.tx_burst(&mut keep);
        })
        .unwrap();
        assert_eq!(t.round_trips + t.lost, 1000);
        assert_eq!(t.lost, 100);
        assert_eq!(dropped, 100);
        assert_eq!(t.errors, 0);
    }
}
