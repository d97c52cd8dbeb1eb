//! The workspace tools, called as a model calls them: through a Toolbox, arguments as JSON.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stategraph_llm::ToolCall;
use stategraph_tools::workspace::{Workspace, WorkspaceLimits, TOOL_NAMES};
use stategraph_tools::{ToolResult, Toolbox};

struct Ws {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    tools: Toolbox,
}

fn ws_with(limits: WorkspaceLimits) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path().join("ws"))
        .unwrap()
        .with_limits(limits);
    Ws {
        root: ws.root().to_path_buf(),
        tools: ws.toolbox(),
        _dir: dir,
    }
}

fn ws() -> Ws {
    ws_with(WorkspaceLimits::default())
}

impl Ws {
    async fn call(&self, name: &str, arguments: Value) -> ToolResult {
        self.tools
            .run(&ToolCall {
                id: "c".into(),
                name: name.into(),
                arguments,
            })
            .await
    }

    async fn ok(&self, name: &str, arguments: Value) -> String {
        let r = self.call(name, arguments).await;
        assert!(!r.is_error, "{name} failed: {}", r.content);
        r.content
    }

    async fn err(&self, name: &str, arguments: Value) -> String {
        let r = self.call(name, arguments).await;
        assert!(r.is_error, "{name} should have failed: {}", r.content);
        r.content
    }
}

#[tokio::test]
async fn names_and_argument_names_are_the_contract() {
    let w = ws();
    let specs = w.tools.specs();
    assert_eq!(
        specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        TOOL_NAMES
    );
    let props = |name: &str| -> Vec<String> {
        let spec = specs.iter().find(|s| s.name == name).unwrap();
        let mut keys: Vec<String> = spec.parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(props("list_dir"), ["path"]);
    assert_eq!(props("read_file"), ["end_line", "path", "start_line"]);
    assert_eq!(props("write_file"), ["content", "path"]);
    assert_eq!(props("edit_file"), ["new", "old", "path"]);
    assert_eq!(props("search_files"), ["path", "pattern"]);
    assert_eq!(props("run_command"), ["command", "timeout_s"]);
}

#[tokio::test]
async fn files_are_written_read_listed_and_edited() {
    let w = ws();
    let out = w
        .ok(
            "write_file",
            json!({"path": "pkg/mod.py", "content": "a = 1\nb = 2\nc = 3\n"}),
        )
        .await;
    assert!(out.starts_with("created `pkg/mod.py`"), "{out}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("pkg/mod.py")).unwrap(),
        "a = 1\nb = 2\nc = 3\n"
    );
    assert_eq!(
        w.ok(
            "read_file",
            json!({"path": "pkg/mod.py", "start_line": 2, "end_line": 3})
        )
        .await,
        "b = 2\nc = 3\n"
    );
    assert!(w
        .ok("list_dir", json!({"path": "."}))
        .await
        .contains("pkg/"));
    assert!(w
        .ok("list_dir", json!({"path": "pkg"}))
        .await
        .contains("mod.py (18 bytes)"));
    assert_eq!(
        w.ok(
            "edit_file",
            json!({"path": "pkg/mod.py", "old": "b = 2", "new": "b = 20"})
        )
        .await,
        "edited `pkg/mod.py` at line 2"
    );
    let absent = w
        .err(
            "edit_file",
            json!({"path": "pkg/mod.py", "old": "z = 9", "new": ""}),
        )
        .await;
    assert!(absent.contains("does not occur"), "{absent}");
    let twice = w
        .err(
            "edit_file",
            json!({"path": "pkg/mod.py", "old": " = ", "new": "="}),
        )
        .await;
    assert!(twice.contains("occurs 3 times"), "{twice}");
    assert!(w
        .err("read_file", json!({"path": "missing.txt"}))
        .await
        .contains("does not exist"));
    // Atomic writes leave no temporary files behind.
    let names: Vec<_> = std::fs::read_dir(w.root.join("pkg"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["mod.py"]);
}

#[tokio::test]
async fn reading_a_large_file_is_capped_and_says_how_to_read_on() {
    let w = ws_with(WorkspaceLimits {
        max_read_bytes: 100,
        ..WorkspaceLimits::default()
    });
    let body: String = (1..=50).map(|n| format!("line {n:03}\n")).collect();
    w.ok("write_file", json!({"path": "big.txt", "content": body}))
        .await;
    let out = w.ok("read_file", json!({"path": "big.txt"})).await;
    assert!(out.len() < 200, "{out}");
    assert!(
        out.contains("lines 1-11 of 50 shown; read from line 12"),
        "{out}"
    );
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_by_every_tool() {
    let w = ws();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s3cret").unwrap();
    std::os::unix::fs::symlink(outside.path(), w.root.join("escape")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        w.root.join("secret_link.txt"),
    )
    .unwrap();
    let secret = outside.path().join("secret.txt").display().to_string();
    for path in [
        "../x.txt",
        "a/../../x.txt",
        secret.as_str(),
        "escape/secret.txt",
        "secret_link.txt",
    ] {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "x"})),
            (
                "edit_file",
                json!({"path": path, "old": "s3cret", "new": "x"}),
            ),
            ("list_dir", json!({"path": path})),
            ("search_files", json!({"pattern": "s3cret", "path": path})),
        ] {
            let message = w.err(tool, args).await;
            assert!(
                message.contains("outside the workspace") || message.contains("absolute path"),
                "{tool} {path}: {message}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "s3cret"
    );
    assert!(
        !w.ok("search_files", json!({"pattern": "s3cret"}))
            .await
            .contains("secret"),
        "search does not follow links out"
    );
}

#[tokio::test]
async fn search_honours_gitignore_and_reports_file_and_line() {
    let w = ws();
    w.ok(
        "write_file",
        json!({"path": ".gitignore", "content": "build/\n"}),
    )
    .await;
    w.ok(
        "write_file",
        json!({"path": "src/a.py", "content": "def add(a, b):\n    return a + b\n"}),
    )
    .await;
    w.ok(
        "write_file",
        json!({"path": "build/a.py", "content": "def add(x): pass\n"}),
    )
    .await;
    let out = w.ok("search_files", json!({"pattern": r"def \w+\("})).await;
    assert_eq!(out, "src/a.py:1: def add(a, b):");
    assert!(w
        .err("search_files", json!({"pattern": "(unclosed"}))
        .await
        .contains("not a valid regular expression"));
    assert!(w
        .ok(
            "search_files",
            json!({"pattern": "nothing here", "path": "src"})
        )
        .await
        .starts_with("no line matches"));
}

#[tokio::test]
async fn commands_report_exit_code_and_the_tail_of_their_output() {
    let w = ws_with(WorkspaceLimits {
        max_output_bytes: 64,
        ..WorkspaceLimits::default()
    });
    let out = w
        .ok(
            "run_command",
            json!({"command": "echo hi > f.txt; cat f.txt; exit 3"}),
        )
        .await;
    assert_eq!(out, "exit code: 3\nhi\n");
    assert!(
        w.root.join("f.txt").is_file(),
        "the command runs in the workspace"
    );
    let long = w
        .ok(
            "run_command",
            json!({"command": "seq 1 1000; echo failure at the end >&2"}),
        )
        .await;
    assert!(long.contains("earlier bytes cut"), "{long}");
    assert!(long.ends_with("failure at the end\n"), "{long}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let w = ws();
    let started = Instant::now();
    let out = w
        .err(
            "run_command",
            json!({"command": "sleep 60 & echo $! > child.pid; echo started; wait", "timeout_s": 1}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        out.contains("timed out after 1s") && out.contains("started"),
        "{out}"
    );
    let pid: i32 = std::fs::read_to_string(w.root.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The background child was killed with its group (give the kernel a moment to reap it).
    let mut alive = true;
    for _ in 0..50 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            alive = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !alive,
        "the command's background child {pid} outlived the timeout"
    );
}
