//! The host's NUMA topology as it matters to a stack, and where the stack, its memory and the
//! application go on it.
//!
//! `host` reads the topology from a root directory (`/` normally, a synthetic tree in tests):
//! nodes with their CPUs, memory and hugepages, each interface's node. `placement` decides from
//! it, as a pure function, the node of the DPDK memory, the stack threads' CPUs and the
//! application's CPUs and memory policy (`runtime.numa`, `runtime.cpus`, `pronghorn run
//! --cpus`). `pronghorn topo` shows the first; the runtime and `pronghorn run` apply the second.

pub mod host;
pub mod placement;

pub use placement::{decide, MemPolicy, Numa, Placement, Request};

/// A kernel CPU list (`0-3,8,10-11`) as a user writes it, strictly: every part must parse.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let number = |s: &str| {
            s.trim().parse::<u32>().ok().filter(|c| *c < 1024).ok_or_else(|| {
                format!("\"{part}\" is not a CPU or a range of CPUs (numbers 0 to 1023, as in \"1,4-7\")")
            })
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if b < a {
                    return Err(format!("the range \"{part}\" runs backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_parse_strictly() {
        assert_eq!(parse_cpu_list("1,4-6,2"), Ok(vec![1, 2, 4, 5, 6]));
        assert_eq!(parse_cpu_list("3"), Ok(vec![3]));
        for bad in ["", "1,", "a", "3-1", "1-x", "2048"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
