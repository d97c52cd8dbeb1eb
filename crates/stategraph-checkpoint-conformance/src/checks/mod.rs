//! The checks, one file per promise of the contract. Public only for the kit's macros.

pub mod checkpoints;
pub mod durability;
pub mod hitl;
pub mod integrity;
pub mod journal;
pub mod leases;
pub mod pending;
pub mod schema;
pub mod storage;
pub mod subgraph_state;
pub mod subgraphs;
pub mod threads;
pub mod time_travel;
