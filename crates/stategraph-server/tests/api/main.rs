//! The server over real HTTP on 127.0.0.1, with small graphs registered here (`support.rs`):
//! assistants, threads and state (`threads.rs`), runs and their streams (`runs.rs`: a pause
//! answered with `command.resume`, two stream modes, a stream rejoined with `Last-Event-ID`,
//! a busy thread), a command's update and goto and the graph's input checks (`commands.rs`),
//! the token (`auth.rs`), the web page and the plan it edits (`page.rs`), the OpenAPI document
//! against the routes (`openapi.rs`), a thread's cost, artifact files and forks (`extras.rs`), the
//! long-term store (`store.rs`), and LangGraph's own Python client against it (`sdk.rs`, which runs
//! `tests/sdk_compat.py`).

mod auth;

mod cancel;
mod commands;
mod extras;
mod openapi;
mod page;
mod runs;
mod sdk;
mod stateless;
mod store;
mod support;
mod threads;
