//! `pronghorn conns`: a process's sockets, one line each, in the shape of `ss -tanei`.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::Args;

use super::{control_lines, pick};

#[derive(Args)]
pub struct ConnsArgs {
    /// The accelerated process (the only one, if not given).
    #[arg(value_parser = super::parse_pid)]
    pid: Option<u32>,
    /// One JSON object per socket, one per line.
    #[arg(long)]
    json: bool,
}

/// One socket as the process described it (`key=value` fields).
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split(' ').filter_map(|f| f.split_once('=')).collect()
}

pub fn run(args: ConnsArgs) -> Result<i32> {
    let p = pick(args.pid)?;
    let lines = control_lines(p.pid, "conns")?;
    if args.json {
        for line in &lines {
            let f = fields(line);
            let v: serde_json::Map<String, serde_json::Value> = f
                .iter()
                .map(|(k, v)| {
                    let value = v.parse::<u64>().map_or_else(|_| serde_json::Value::from(*v), serde_json::Value::from);
                    (k.to_string(), value)
                })
                .collect();
            println!("{}", serde_json::Value::Object(v));
        }
        return Ok(0);
    }
    println!(
        "{:<11}{:>7} {:>7} {:<46}{:<46}Details",
        "State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port"
    );
    for line in &lines {
        let f = fields(line);
        let get = |k: &str| f.get(k).copied().unwrap_or("-");
        let mut details = format!("fd:{} shard:{} {}", get("fd"), get("shard"), get("proto"));
        if f.contains_key("cwnd") {
            if get("ts") == "1" {
                details.push_str(" ts");
            }
            if get("sack") == "1" {
                details.push_str(" sack");
            }
            if get("snd_wscale") != "-" {
                details.push_str(&format!(" wscale:{},{}", get("snd_wscale"), get("rcv_wscale")));
            }
            let ms = |k: &str| get(k).parse::<f64>().map_or("-".to_string(), |us| format!("{:.3}", us / 1000.0));
            details.push_str(&format!(
                " rto:{} rtt:{}/{} mss:{} rcvmss:{} cwnd:{} ssthresh:{} unacked:{} retrans:{}/{} snd_wnd:{} rcv_wnd:{}",
                get("rto_ms"),
                ms("srtt_us"),
                ms("rttvar_us"),
                get("mss"),
                get("rcv_mss"),
                get("cwnd"),
                if get("ssthresh") == u32::MAX.to_string() { "-" } else { get("ssthresh") },
                get("unacked"),
                get("backoff"),
                get("retrans"),
                get("snd_wnd"),
                get("rcv_wnd"),
            ));
            if get("recovery") == "1" {
                details.push_str(" recovery");
            }
        }
        println!(
            "{:<11}{:>7} {:>7} {:<46}{:<46}{details}",
            get("state"),
            get("recvq"),
            get("sendq"),
            get("local"),
            get("peer")
        );
    }
    Ok(0)
}
