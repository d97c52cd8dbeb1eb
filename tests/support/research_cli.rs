//! A research setup for tests that drive the real `graph` binary through the research agent:
//! a store, a local corpus of three documents, and a stand-in OpenAI-compatible server (see
//! `fake_openai.rs`) that plans three todos (t1, t2, and t3 after t1) and reviews each one.
//! Include it after `fake_openai.rs` (as `fake_openai`), `cli.rs` (as `harness`) and
//! `../research_support.rs` (as `research_support`).

#![allow(dead_code)]

use super::fake_openai::FakeOpenAi;
use super::harness::{Db, TestCommand};
use serde_json::{json, Value};

pub const QUESTION: &str = "How does sled make writes durable?";
pub const T1: &str = "How does sled make writes durable";
pub const T2: &str = "What is the Tokio runtime";
pub const T3: &str = "How do log-structured merge trees compact";

/// A folder of three small documents (the one the library's research tests search).
pub fn corpus() -> tempfile::TempDir {
    super::research_support::corpus()
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

    /// One todo of the thread's plan.
    pub fn todo(&self, thread: &str, id: &str) -> Value {
        self.plan_json(thread)
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no todo {id}"))
    }

    /// The thread's history, as `graph history --json` gives it.
    pub fn history(&self, thread: &str) -> Value {
        self.graph(&["history", thread, "--json"]).expect(0).json()
    }
}
