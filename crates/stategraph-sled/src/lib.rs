//! Embedded on-disk checkpointers for stategraph, over sled 0.34.
//!
//! # Layout
//! - [`SledCheckpointer`] (`sled_store/`): every thread in one sled directory. By job:
//!   `open.rs` opening and what sled's refusals mean, `checkpointer.rs` the contract over sled's
//!   trees, `pieces.rs` large snapshots' shared pieces, `keys.rs` the key layout, `inspect.rs`
//!   what the per-thread layout reads beyond the contract, `mark.rs` a new store's first flush,
//!   `witness.rs` the per-thread layout's record of what each flush made durable.
//! - [`FolderCheckpointer`] (`folders/`): one sled store per thread in a folder per thread, what
//!   the `graph` command uses: locks, an owner socket that serves a held thread's reads to other
//!   processes, read copies (a read never writes), blob checks, an index cache and repair.
//! - [`SledStore`] (`item_store.rs`): the long-term store (items across threads) in a sled
//!   directory of its own, `<db>/items/` beside a folder store's threads.
//! - [`SledCache`] (`cache.rs`): a store's node cache in a sled directory of its own, opened
//!   per operation so every process of the store shares it.
//! - `io_failure.rs`: a store whose disk failed answers every later write with that failure.
//!
//! Both implement [`stategraph_checkpoint::Checkpointer`] and pass its conformance kit. They move
//! records and never interpret a state.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cache;
mod folders;
mod io_failure;
mod item_store;
mod sled_store;

pub use cache::{tamper_cache_entries, SledCache};
pub use folders::{
    Damage, FolderCheckpointer, RecordUnreadable, RepairReport, RequiredRecord, ThreadListing,
};
pub use item_store::SledStore;
pub use sled_store::{SledCheckpointer, SledOptions};
