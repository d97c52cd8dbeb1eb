//! What sled's open costs, and which settings change it: a probe, not a criterion bench.
//!
//! ```text
//! cargo bench --bench sled_open            # every configuration, 5 fresh processes each
//! cargo bench --bench sled_open -- --records 100000
//! ```
//!
//! For each configuration it writes a store shaped like the `loop` workload's (one tree, N
//! records of 740 bytes under time-ordered keys, each insert flushed as durability sync does),
//! closes it, then opens it from fresh processes (sled's I/O threads start once per process,
//! so a second open in the same process would flatter it) and reads the last key. It prints
//! one line per configuration: open and read medians in ms, and the store's bytes on disk.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const RECORD: usize = 740;

/// (name, segment size, cache bytes, mode)
const CONFIGS: &[(&str, usize, u64, &str)] = &[
    (
        "default 512K seg, 16M cache",
        512 * 1024,
        16 << 20,
        "low-space",
    ),
    ("512K seg, 1M cache", 512 * 1024, 1 << 20, "low-space"),
    (
        "512K seg, high-throughput",
        512 * 1024,
        16 << 20,
        "high-throughput",
    ),
    (
        "small(): 64K seg, 4M cache",
        64 * 1024,
        4 << 20,
        "low-space",
    ),
    (
        "64K seg, high-throughput",
        64 * 1024,
        4 << 20,
        "high-throughput",
    ),
    ("16K seg, 4M cache", 16 * 1024, 4 << 20, "low-space"),
];

fn config(dir: &Path, segment: usize, cache: u64, mode: &str) -> sled::Config {
    let mode = match mode {
        "high-throughput" => sled::Mode::HighThroughput,
        _ => sled::Mode::LowSpace,
    };
    sled::Config::new()
        .path(dir)
        .segment_size(segment)
        .cache_capacity(cache)
        .use_compression(false)
        .mode(mode)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn write(dir: &Path, segment: usize, cache: u64, mode: &str, records: usize) {
    let db = config(dir, segment, cache, mode).open().expect("open");
    let tree = db.open_tree("checkpoints").expect("tree");
    let value = vec![b'x'; RECORD];
    for i in 0..records as u64 {
        let mut key = b"loop\0".to_vec();
        key.extend_from_slice(&i.to_be_bytes());
        tree.insert(key, value.as_slice()).expect("insert");
        db.flush().expect("flush");
    }
}

/// Opens and reads the last key; prints "open_ms read_ms".
fn open(dir: &Path, segment: usize, cache: u64, mode: &str) {
    let t0 = Instant::now();
    let db = config(dir, segment, cache, mode).open().expect("open");
    let tree = db.open_tree("checkpoints").expect("tree");
    let opened = t0.elapsed();
    let t1 = Instant::now();
    let last = tree.scan_prefix(b"loop\0").next_back().expect("a record");
    let read = t1.elapsed();
    assert_eq!(last.expect("read").1.len(), RECORD);
    println!(
        "{:.3} {:.3}",
        opened.as_secs_f64() * 1e3,
        read.as_secs_f64() * 1e3
    );
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--child-open") {
        let segment = args[2].parse().expect("segment");
        let cache = args[3].parse().expect("cache");
        open(Path::new(&args[1]), segment, cache, &args[4]);
        return;
    }
    let records = match args.iter().position(|a| a == "--records") {
        Some(i) => args[i + 1].parse().expect("--records takes a number"),
        None => 1000,
    };
    let me = std::env::current_exe().expect("own path");
    println!(
        "records={records} of {RECORD} bytes, each insert flushed; medians of 5 fresh processes"
    );
    for (name, segment, cache, mode) in CONFIGS {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("store");
        let t = Instant::now();
        write(&dir, *segment, *cache, mode, records);
        let write_s = t.elapsed().as_secs_f64();
        let (mut opens, mut reads) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let out = Command::new(&me)
                .args(["--child-open", dir.to_str().expect("utf-8 path")])
                .args([segment.to_string(), cache.to_string(), mode.to_string()])
                .output()
                .expect("child");
            let text = String::from_utf8_lossy(&out.stdout);
            let mut parts = text
                .split_whitespace()
                .map(|x| x.parse::<f64>().expect("ms"));
            opens.push(parts.next().expect("open ms"));
            reads.push(parts.next().expect("read ms"));
        }
        println!(
            "{name:32} write {:7.1} us/insert  open {:6.2} ms  read {:6.3} ms  disk {:8} bytes",
            write_s / records as f64 * 1e6,
            median(opens),
            median(reads),
            dir_bytes(&dir)
        );
    }
}
