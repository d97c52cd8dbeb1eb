//! A research setup for tests that drive the real `graph` binary through the research agent:
//! a store, a local corpus of three documents, and a stand-in OpenAI-compatible server (see
//! `fake_openai.rs`) that plans three todos (t1, t2, and t3 after t1) and reviews each one.
//! Include it after `fake_openai.rs` (as `fake_openai`) and `cli.rs` (as `harness`).

#![allow(dead_code)]

use super::fake_openai::FakeOpenAi;
use super::harness::{Db, TestCommand};
use serde_json::{json, Value};

pub const QUESTION: &str = "How does sled make writes durable?";
pub const T1: &str = "How does sled make writes durable";
pub const T2: &str = "What is the Tokio runtime";
pub const T3: &str = "How do log-structured merge trees compact";

/// A folder of three small documents.
pub fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let docs = [
        ("sled.md", "# Sled durability\n\nsled is an embedded database written in Rust. Writes become durable when the log is flushed to disk with fsync; flush_every_ms flushes every 500 ms by default."),
        ("tokio.md", "# Tokio runtime\n\nTokio is an asynchronous runtime for Rust with a work-stealing scheduler and timers."),
        ("lsm.md", "# Log-structured storage\n\nLog-structured merge trees batch writes in memory and write sorted runs; compaction merges runs in the background."),
    ];
    for (name, text) in docs {
        std::fs::write(dir.path().join(name), text).expect("write doc");
    }
    dir
}

/// t1, t2, and t3 after t1.
pub fn three_todos() -> Value {
    json!({"todos": [
        {"id": "t1", "task": T1, "kind": "research", "dependencies": []},
        {"id": "t2", "task": T2, "kind": "research", "dependencies": []},
        {"id": "t3", "task": T3, "kind": "research", "dependencies": ["t1"]}
    ]})
}

/// A review that accepts the todo.
pub fn done() -> Value {
    json!({"task_outcome": "answered", "status": "done", "new_tasks": []})
}

/// A store, a corpus and the stand-in model server.
pub struct Research {
    pub db: Db,
    pub docs: tempfile::TempDir,
    pub server: FakeOpenAi,
}

impl Research {
    /// Three todos, each accepted at review.
    pub fn new() -> Self {
        Self::with_server(FakeOpenAi::start(three_todos(), |_| done()))
    }

    pub fn with_server(server: FakeOpenAi) -> Self {
        Research {
            db: Db::new(),
            docs: corpus(),
            server,
        }
    }

    /// `graph <args>` pointed at the stand-in server, with nothing else configured.
    pub fn graph(&self, args: &[&str]) -> TestCommand {
        self.db.graph(args).with_model_at(&self.server.base_url())
    }

    /// `graph run research --input QUESTION --set search.corpus=DIR <extra>`.
    pub fn run(&self, extra: &[&str]) -> TestCommand {
        let corpus = format!("search.corpus={}", self.docs.path().display());
        let mut args = vec!["run", "research", "--input", QUESTION, "--set", &corpus];
        args.extend_from_slice(extra);
        self.graph(&args)
    }

    /// The thread's plan, as `graph plan --json` gives it.
    pub fn plan_json(&self, thread: &str) -> Value {
        self.graph(&["plan", thread, "--json"]).expect(0).json()["plan"].clone()
    }

    /// The thread's history, as `graph history --json` gives it.
    pub fn history(&self, thread: &str) -> Value {
        self.graph(&["history", thread, "--json"]).expect(0).json()
    }
}
