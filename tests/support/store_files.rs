//! What a store's files hold, to show that a command wrote nothing: a read never writes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir` with its bytes.
pub fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Fails naming the file when a file appeared, vanished or changed.
pub fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(before), names(after), "files appeared or vanished");
    for (name, bytes) in before {
        assert!(after[name] == *bytes, "{name} changed");
    }
}

/// Flips one bit in the middle of `file`, as a disk that lost a bit does.
pub fn flip_a_bit(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(file, bytes).unwrap();
}

/// The files under `store/blobs` (sled keeps a value over a quarter of a segment in a file of
/// its own there), sorted by name.
pub fn blob_files(store: &Path) -> Vec<std::path::PathBuf> {
    let mut blobs: Vec<_> = match std::fs::read_dir(store.join("blobs")) {
        Ok(dir) => dir.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    blobs.sort();
    blobs
}
