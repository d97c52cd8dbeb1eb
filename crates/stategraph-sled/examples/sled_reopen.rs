//! What opening and closing one small sled store costs, with and without sled's background
//! flusher thread: a probe for the per-thread store's open and close (`sled_store/open.rs`).
//!
//! ```text
//! cargo run --release -p stategraph-sled --example sled_reopen -- [CYCLES]
//! ```
//!
//! Each cycle opens the store as `SledCheckpointer` does (64 KiB segments, 4 MiB cache), writes
//! one record, flushes it, and closes the store. It prints the mean open, write+flush and close
//! times for each setting, alternating them.

use std::time::{Duration, Instant};

fn cycle(dir: &std::path::Path, flusher: bool, n: u64, t: &mut [Duration; 3]) {
    let start = Instant::now();
    let db = sled::Config::new()
        .path(dir)
        .segment_size(64 * 1024)
        .cache_capacity(4 << 20)
        .flush_every_ms(flusher.then_some(500))
        .open()
        .expect("open");
    let tree = db.open_tree("checkpoints").expect("tree");
    t[0] += start.elapsed();
    let start = Instant::now();
    tree.insert(n.to_be_bytes(), vec![b'x'; 300])
        .expect("insert");
    db.flush().expect("flush");
    t[1] += start.elapsed();
    let start = Instant::now();
    drop(tree);
    drop(db);
    t[2] += start.elapsed();
}

fn main() {
    let cycles: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let root = tempfile::tempdir().expect("tempdir");
    let mut times = [[Duration::ZERO; 3]; 2];
    for n in 0..cycles {
        for (i, flusher) in [true, false].into_iter().enumerate() {
            cycle(&root.path().join(format!("{i}")), flusher, n, &mut times[i]);
        }
    }
    for (i, name) in ["with flusher", "without"].iter().enumerate() {
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / cycles as f64;
        println!(
            "{name}: open {:.3} ms, write+flush {:.3} ms, close {:.3} ms",
            ms(times[i][0]),
            ms(times[i][1]),
            ms(times[i][2])
        );
    }
}
