//! The MCP tools against real servers from npm (`@modelcontextprotocol/server-everything` and
//! `server-filesystem`, installed by `.ci/run` under target/mcp-npm): listing with prefixed
//! names, calls and their results (text, an image as a note, structured content), env passed
//! to a server, a server that does not start, a call that times out, a server killed between
//! calls (restarted) and one killed under a call (the model is told, the call is not re-sent).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stategraph_llm::ToolCall;
use stategraph_mcp::{McpError, McpSettings, McpTools, ServerSettings};
use stategraph_tools::{ToolResult, Toolbox};

/// An npm MCP server's launcher, or a failure naming what installs it.
fn npm_server(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("target/mcp-npm/node_modules/.bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash .ci/run` once (it installs the npm MCP servers the tests use)",
        path.display()
    );
    path.canonicalize().unwrap().display().to_string()
}

/// A server of `settings` marked by a unique environment variable, so the test can find (and
/// kill) its process among those of the tests running beside it.
fn everything(mark: &str) -> ServerSettings {
    let mut server = ServerSettings::stdio(npm_server("mcp-server-everything"), ["stdio"]);
    server.env.insert("STATEGRAPH_MCP_TEST".into(), mark.into());
    server
}

fn settings(servers: Vec<(&str, ServerSettings)>) -> McpSettings {
    McpSettings {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
    }
}

async fn call(tools: &Toolbox, name: &str, arguments: Value) -> ToolResult {
    tools
        .run(&ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
        })
        .await
}

/// The pids of live processes whose environment holds `mark`.
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("STATEGRAPH_MCP_TEST={mark}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let alive = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        if alive && environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// Kills the server marked `mark` and waits until it is gone.
fn kill_marked(mark: &str) {
    let pids = marked(mark);
    assert!(!pids.is_empty(), "no server process marked {mark}");
    for pid in &pids {
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    let start = Instant::now();
    while !marked(mark).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server did not die"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn the_everything_servers_tools_are_listed_prefixed_and_called() {
    let mut server = everything("listing");
    server
        .env
        .insert("MCP_TEST_GREETING".into(), "from the settings".into());
    let mcp = McpTools::connect(&settings(vec![("ev", server)]))
        .await
        .unwrap();
    let names = mcp.names();
    assert!(names.contains(&("ev.echo", "ev__echo")), "{names:?}");
    assert!(names.contains(&("ev.get-sum", "ev__get-sum")), "{names:?}");
    let tools = Toolbox::new(mcp.tools());
    let spec = tools
        .specs()
        .into_iter()
        .find(|s| s.name == "ev__get-sum")
        .unwrap();
    assert_eq!(spec.parameters["type"], "object");
    assert!(
        spec.parameters["properties"]["a"].is_object(),
        "{}",
        spec.parameters
    );

    let echo = call(&tools, "ev__echo", json!({"message": "hi there"})).await;
    assert!(
        !echo.is_error && echo.content.contains("hi there"),
        "{echo:?}"
    );
    let sum = call(&tools, "ev__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(!sum.is_error && sum.content.contains('5'), "{sum:?}");
    let image = call(&tools, "ev__get-tiny-image", json!({})).await;
    assert!(
        image.content.contains("[an image (image/png"),
        "{}",
        image.content
    );
    let structured = call(
        &tools,
        "ev__get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    assert!(!structured.is_error, "{structured:?}");
    assert!(
        structured.content.contains("temperature"),
        "{}",
        structured.content
    );
    let env = call(&tools, "ev__get-env", json!({})).await;
    assert!(
        env.content.contains("from the settings"),
        "env reaches the server"
    );
    // Arguments the server's schema refuses: an error naming the tool, for the model.
    let bad = call(&tools, "ev__get-sum", json!({"a": "two"})).await;
    assert!(bad.is_error, "{bad:?}");
    assert!(bad.content.contains("get-sum"), "{}", bad.content);

    assert_eq!(mcp.resolve("ev.echo").unwrap(), "ev__echo");
    let typo = mcp.resolve("ev.ecoh").unwrap_err().to_string();
    assert!(
        typo.contains("ev.ecoh") && typo.contains("ev.echo"),
        "{typo}"
    );
    let other = mcp.resolve("fs.write_file").unwrap_err().to_string();
    assert!(other.contains("servers: ev"), "{other}");
}

#[tokio::test]
async fn the_filesystem_server_writes_and_reads_in_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let server = ServerSettings::stdio(
        npm_server("mcp-server-filesystem"),
        [root.display().to_string()],
    );
    let mcp = McpTools::connect(&settings(vec![("fs", server)]))
        .await
        .unwrap();
    let tools = Toolbox::new(mcp.tools());
    let file = root.join("note.txt").display().to_string();
    let wrote = call(
        &tools,
        "fs__write_file",
        json!({"path": file, "content": "one line\n"}),
    )
    .await;
    assert!(!wrote.is_error, "{wrote:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "one line\n"
    );
    let read = call(&tools, "fs__read_text_file", json!({"path": file})).await;
    assert!(read.content.contains("one line"), "{read:?}");
    let outside = call(
        &tools,
        "fs__read_text_file",
        json!({"path": "/etc/hostname"}),
    )
    .await;
    assert!(outside.is_error, "{outside:?}");
}

#[tokio::test]
async fn a_server_that_does_not_start_is_an_error_naming_it_with_its_last_words() {
    let dies = ServerSettings::stdio("sh", ["-c", "echo 'cannot open the database' >&2; exit 3"]);
    let err = match McpTools::connect(&settings(vec![("db", dies)])).await {
        Err(e) => e,
        Ok(_) => panic!("a server that exits at once started"),
    };
    assert!(matches!(err, McpError::NotStarted { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("MCP server `db` did not start"), "{text}");
    assert!(text.contains("cannot open the database"), "{text}");

    let missing = ServerSettings::stdio("/no/such/mcp-server", Vec::<String>::new());
    let err = McpTools::connect(&settings(vec![("gone", missing)]))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, McpError::CommandNotFound { .. }), "{err}");

    let mut silent = ServerSettings::stdio("sleep", ["30"]);
    silent.startup_timeout_secs = 1;
    let started = Instant::now();
    let err = McpTools::connect(&settings(vec![("mute", silent)]))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("within 1s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_call_past_its_time_limit_is_cancelled_and_the_model_told() {
    let mut server = everything("timeout");
    server.timeout_secs = 1;
    let mcp = McpTools::connect(&settings(vec![("ev", server)]))
        .await
        .unwrap();
    let tools = Toolbox::new(mcp.tools());
    let started = Instant::now();
    let slow = call(
        &tools,
        "ev__trigger-long-running-operation",
        json!({"duration": 20, "steps": 2}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(slow.is_error, "{slow:?}");
    assert!(
        slow.content.contains(
            "MCP server `ev` did not answer the call of `trigger-long-running-operation` within 1s"
        ),
        "{}",
        slow.content
    );
    // The server is still there for the next call.
    let echo = call(&tools, "ev__echo", json!({"message": "still here"})).await;
    assert!(echo.content.contains("still here"), "{echo:?}");
}

#[tokio::test]
async fn a_server_killed_between_calls_is_restarted_for_the_next() {
    let mark = "between";
    let mcp = McpTools::connect(&settings(vec![("ev", everything(mark))]))
        .await
        .unwrap();
    let tools = Toolbox::new(mcp.tools());
    assert!(
        !call(&tools, "ev__echo", json!({"message": "one"}))
            .await
            .is_error
    );
    let before = marked(mark);
    kill_marked(mark);
    // Give the session a moment to see its pipe close, as between two model rounds.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = call(&tools, "ev__echo", json!({"message": "two"})).await;
    assert!(
        !again.is_error && again.content.contains("two"),
        "{again:?}"
    );
    let after = marked(mark);
    assert_eq!(after.len(), 1, "one new server process");
    assert_ne!(before, after);
}

#[tokio::test]
async fn a_server_killed_under_a_call_gives_the_model_an_error_and_is_not_called_again() {
    let mark = "under";
    let mcp = McpTools::connect(&settings(vec![("ev", everything(mark))]))
        .await
        .unwrap();
    let tools = std::sync::Arc::new(Toolbox::new(mcp.tools()));
    let running = {
        let tools = tools.clone();
        tokio::spawn(async move {
            call(
                &tools,
                "ev__trigger-long-running-operation",
                json!({"duration": 20, "steps": 2}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill_marked(mark);
    let result = running.await.unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .content
            .contains("MCP server `ev` stopped while it ran `trigger-long-running-operation`"),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("restarted for the next call"),
        "{}",
        result.content
    );
    // The server was restarted: the next call is answered.
    let next = call(&tools, "ev__echo", json!({"message": "after"})).await;
    assert!(next.content.contains("after"), "{next:?}");
}

#[tokio::test]
async fn a_streamable_http_server_is_reached_by_its_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut process = tokio::process::Command::new(npm_server("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = process.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let listening = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on port") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(listening, Ok(true), "the HTTP server did not start");
    let mut server = ServerSettings::http(format!("http://127.0.0.1:{port}/mcp"));
    server.headers.insert("X-Test".into(), "yes".into());
    server.token = Some("not-checked-by-this-server".into());
    let mcp = McpTools::connect(&settings(vec![("web", server)]))
        .await
        .unwrap();
    let tools = Toolbox::new(mcp.tools());
    let echo = call(&tools, "web__echo", json!({"message": "over http"})).await;
    assert!(
        !echo.is_error && echo.content.contains("over http"),
        "{echo:?}"
    );
    drop(mcp);
    process.kill().await.unwrap();
}
