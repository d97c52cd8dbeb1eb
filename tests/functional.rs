//! The functional API through its public face: a function's durable tasks are not run again
//! after a real SIGKILL, a pause and an answer, or when run concurrently; a function that calls
//! its tasks in another order on re-execution is refused; the stream shows each task.
//!
//! The kill test runs this test binary again as a child (the hidden `function_child` test, as
//! `crash.rs` does); every task appends `NAME PID` to a log (fsync per line) when it runs, so
//! the log counts side effects across processes.

use futures::StreamExt;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::functional::{
    entrypoint, entrypoint_with, FunctionContext, FunctionState, TaskEvent, TaskStatus, TASK_EVENT,
};
use stategraph::graph::RetryPolicy;
use stategraph::runtime::{
    Event, NodeError, NodeErrorKind, Resume, RunConfig, RunError, RunStatus, StreamMode,
};
use stategraph::CompiledGraph;
use stategraph_sled::SledCheckpointer;
#[path = "support/killed_child.rs"]
mod killed_child;
use killed_child::{
    child_runtime, kill_when_logged, log_line, log_lines, open_retrying, run_or_resume, spawn_self,
    wait_ok,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CHILD_ENV: &str = "STATEGRAPH_FUNCTION_CHILD";
const THREAD: &str = "report";

/// `fetch`, then two `draft`s together, then `publish`, which waits to be killed while `hang`
/// exists. Each task logs `NAME PID` when it runs.
fn report(dir: &Path) -> CompiledGraph<FunctionState> {
    let (log, hang) = (dir.join("log"), dir.join("hang"));
    let pid = std::process::id();
    entrypoint("report", move |topic: String, ctx: FunctionContext| {
        let (log, hang) = (log.clone(), hang.clone());
        async move {
            let l = log.clone();
            let facts: Vec<String> = ctx
                .task("fetch", topic, |topic: String| async move {
                    log_line(&l, &format!("fetch {pid}"));
                    Ok::<_, NodeError>(vec![
                        format!("{topic} is durable"),
                        format!("{topic} is fast"),
                    ])
                })
                .await?;
            let drafts = facts.into_iter().map(|fact| {
                let l = log.clone();
                ctx.task("draft", fact, move |fact: String| async move {
                    log_line(&l, &format!("draft {pid}"));
                    Ok::<_, NodeError>(format!("- {fact}"))
                })
            });
            let lines = futures::future::try_join_all(drafts).await?;
            let body = lines.join("\n");
            ctx.task("publish", body, |body: String| async move {
                log_line(&log, &format!("publish {pid}"));
                if hang.exists() {
                    // Killed here by the parent.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok::<_, NodeError>(format!("# Report\n{body}"))
            })
            .await
        }
    })
    .unwrap()
}

#[test]
#[ignore = "a child process of the function kill test, started by it"]
fn function_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    child_runtime().block_on(async {
        let graph = report(&dir).with_checkpointer(Arc::new(open_store(&dir.join("store"))));
        let config = || {
            let mut config = RunConfig::new().thread(THREAD);
            // A killed run's claim on the thread lapses after this.
            config.lease_ttl = Duration::from_secs(2);
            config
        };
        let input = || FunctionState::input("sled").unwrap();
        let out = run_or_resume(&graph, THREAD, input, config).await;
        assert_eq!(out.status, RunStatus::Done);
        log_line(&dir.join("log"), &format!("done {}", std::process::id()));
    });
}

fn open_store(store: &Path) -> SledCheckpointer {
    open_retrying(|| SledCheckpointer::open(store))
}

#[test]
fn a_function_killed_mid_run_resumes_without_running_its_finished_tasks_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("hang"), b"").unwrap();

    let log = dir.join("log");
    let mut first = spawn_self("function_child", CHILD_ENV, dir);
    let first_pid = first.id();
    kill_when_logged(&mut first, &log, &format!("publish {first_pid}"));

    std::fs::remove_file(dir.join("hang")).unwrap();
    let second = spawn_self("function_child", CHILD_ENV, dir);
    let second_pid = second.id();
    wait_ok(second);

    assert_eq!(
        log_lines(&log),
        vec![
            format!("fetch {first_pid}"),
            format!("draft {first_pid}"),
            format!("draft {first_pid}"),
            format!("publish {first_pid}"),
            format!("publish {second_pid}"),
            format!("done {second_pid}"),
        ],
        "the resumed function ran only the task it was killed in"
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let state = runtime.block_on(async {
        let graph = report(dir).with_checkpointer(Arc::new(open_store(&dir.join("store"))));
        graph.get_state(THREAD, None).await.unwrap()
    });
    assert_eq!(
        state.values.output_as::<String>().unwrap().as_deref(),
        Some("# Report\n- sled is durable\n- sled is fast")
    );
    assert!(state.next.is_empty(), "the thread is finished");
}

/// Counts of how many times each task body ran.
#[derive(Default)]
struct Runs {
    plan: AtomicU32,
    write: AtomicU32,
}

/// `plan`, then a question, then `write` with the answer.
fn reviewed(runs: Arc<Runs>) -> CompiledGraph<FunctionState> {
    entrypoint("reviewed", move |topic: String, ctx: FunctionContext| {
        let runs = runs.clone();
        async move {
            let r = runs.clone();
            let plan: String = ctx
                .task("plan", topic, |topic: String| async move {
                    r.plan.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, NodeError>(format!("plan for {topic}"))
                })
                .await?;
            let verdict: String = ctx
                .interrupt(serde_json::json!({ "question": "approve?", "plan": plan }))
                .await?;
            ctx.task(
                "write",
                (plan, verdict),
                |(plan, verdict): (String, String)| async move {
                    runs.write.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, NodeError>(format!("{plan} ({verdict})"))
                },
            )
            .await
        }
    })
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

#[tokio::test]
async fn a_function_pauses_at_its_question_and_resumes_with_the_answer() {
    let runs = Arc::new(Runs::default());
    let graph = reviewed(runs.clone());
    let config = || RunConfig::new().thread("t");
    let out = graph
        .invoke(FunctionState::input("sled").unwrap(), config())
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, next } = &out.status else {
        panic!(
            "the function should pause at its question: {:?}",
            out.status
        );
    };
    assert_eq!(next, &["reviewed"]);
    assert_eq!(interrupts[0].payload["plan"], "plan for sled");
    assert!(out.state.output.is_null(), "no output before the answer");

    let out = graph
        .resume("t", Resume::value("approved").unwrap(), config())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.output, "plan for sled (approved)");
    assert_eq!(
        (
            runs.plan.load(Ordering::SeqCst),
            runs.write.load(Ordering::SeqCst)
        ),
        (1, 1),
        "`plan` ran once, though the function ran twice"
    );
}

#[tokio::test]
async fn concurrent_tasks_run_together_and_replay_in_call_order() {
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    let graph = entrypoint("squares", move |n: u64, ctx: FunctionContext| {
        let ran = r.clone();
        async move {
            // Every task waits for all of them to start: this finishes only if they run
            // together. Later calls finish first, so finish order is the reverse of call order.
            let all_started = Arc::new(tokio::sync::Barrier::new(n as usize));
            let calls = (1..=n).map(|i| {
                let (ran, all_started) = (ran.clone(), all_started.clone());
                ctx.task("square", i, move |i: u64| async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    all_started.wait().await;
                    tokio::time::sleep(Duration::from_millis(10 * (n - i))).await;
                    Ok::<_, NodeError>(i * i)
                })
            });
            let squares = futures::future::try_join_all(calls).await?;
            let _: String = ctx.interrupt("sum them?").await?;
            Ok(squares)
        }
    })
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let config = || RunConfig::new().thread("sq");
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        graph.invoke(FunctionState::input(4).unwrap(), config()),
    )
    .await
    .expect("the tasks ran one after another, so the barrier never opened")
    .unwrap();
    assert!(first.is_interrupted());

    let out = graph
        .resume("sq", Resume::value("yes").unwrap(), config())
        .await
        .unwrap();
    assert_eq!(
        out.state.output_as::<Vec<u64>>().unwrap(),
        Some(vec![1, 4, 9, 16]),
        "each saved result back at its own call"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 4, "no task ran on the resume");
}

#[tokio::test]
async fn a_function_that_calls_its_tasks_in_another_order_on_resume_is_refused() {
    let resumed = Arc::new(AtomicBool::new(false));
    let other_ran = Arc::new(AtomicBool::new(false));
    let (flag, other) = (resumed.clone(), other_ran.clone());
    let graph = entrypoint(
        "fickle",
        move |_: serde_json::Value, ctx: FunctionContext| {
            let (flag, other) = (flag.clone(), other.clone());
            async move {
                // Decides from something outside its input and results: the mistake refused here.
                let first = if flag.load(Ordering::SeqCst) {
                    "search"
                } else {
                    "fetch"
                };
                ctx.task(first, (), move |()| async move {
                    if first == "search" {
                        other.store(true, Ordering::SeqCst);
                    }
                    Ok::<_, NodeError>(first.to_string())
                })
                .await?;
                let _: String = ctx.interrupt("go on?").await?;
                Ok(())
            }
        },
    )
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let config = || RunConfig::new().thread("f");
    let out = graph
        .invoke(FunctionState::input("x").unwrap(), config())
        .await
        .unwrap();
    assert!(out.is_interrupted());

    resumed.store(true, Ordering::SeqCst);
    let error = graph
        .resume("f", Resume::value("yes").unwrap(), config())
        .await
        .unwrap_err();
    let RunError::NodeFailed {
        kind: NodeErrorKind::NonDeterministic(refusal),
        attempts,
        message,
        ..
    } = &error
    else {
        panic!("expected a refusal for non-determinism, got {error}");
    };
    assert_eq!(
        (
            refusal.function.as_str(),
            refusal.ordinal,
            refusal.recorded.as_str(),
            refusal.called.as_str()
        ),
        ("fickle", 0, "fetch", "search")
    );
    assert_eq!(*attempts, 1, "a refusal is not retried");
    assert!(message.contains("same order on every run"), "{message}");
    assert!(
        !other_ran.load(Ordering::SeqCst),
        "the task called out of order did not run"
    );
}

/// The task events of a stream, as `(ordinal, name, status)`.
async fn task_events(
    graph: &CompiledGraph<FunctionState>,
    resume: Option<Resume>,
) -> Vec<(u32, String, TaskStatus)> {
    let config = RunConfig::new()
        .thread("s")
        .stream_modes([StreamMode::Custom]);
    let mut run = match resume {
        None => graph.stream(FunctionState::input("sled").unwrap(), config),
        Some(resume) => graph.stream_resume("s", resume, config),
    };
    let mut seen = Vec::new();
    while let Some(event) = run.next().await {
        if let Event::Custom { kind, payload, .. } = event {
            if kind == TASK_EVENT {
                let e: TaskEvent = serde_json::from_value(payload).unwrap();
                seen.push((e.ordinal, e.name, e.status));
            }
        }
    }
    run.outcome().await.unwrap();
    seen
}

#[tokio::test]
async fn the_stream_shows_each_task_run_and_replayed() {
    let graph = reviewed(Arc::new(Runs::default()));
    let first = task_events(&graph, None).await;
    assert_eq!(
        first,
        vec![
            (0, "plan".to_string(), TaskStatus::Started),
            (0, "plan".to_string(), TaskStatus::Done),
        ]
    );
    let second = task_events(&graph, Some(Resume::value("ok").unwrap())).await;
    assert_eq!(
        second,
        vec![
            (0, "plan".to_string(), TaskStatus::Replayed),
            (1, "write".to_string(), TaskStatus::Started),
            (1, "write".to_string(), TaskStatus::Done),
        ]
    );
}

#[tokio::test]
async fn a_failed_attempt_keeps_its_finished_tasks_for_the_retry() {
    let (fetched, flaky) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (f, k) = (fetched.clone(), flaky.clone());
    let retry = |node: &mut stategraph::graph::NodeSpec<'_>| {
        node.retry(RetryPolicy::new(2).initial_interval(Duration::from_millis(1)));
    };
    let graph = entrypoint_with(
        "retried",
        retry,
        move |_: serde_json::Value, ctx: FunctionContext| {
            let (f, k) = (f.clone(), k.clone());
            async move {
                let page: String = ctx
                    .task("fetch", (), move |()| async move {
                        f.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, NodeError>("page".to_string())
                    })
                    .await?;
                ctx.task("parse", page, move |page: String| async move {
                    if k.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(NodeError::transient("the parser is busy"));
                    }
                    Ok(page.len())
                })
                .await
            }
        },
    )
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = graph
        .invoke(
            FunctionState::input("x").unwrap(),
            RunConfig::new().thread("r"),
        )
        .await
        .unwrap();
    assert_eq!(out.state.output, 4);
    assert_eq!(
        (fetched.load(Ordering::SeqCst), flaky.load(Ordering::SeqCst)),
        (1, 2),
        "the retry replayed `fetch` and ran `parse` again"
    );
}

#[tokio::test]
async fn an_input_the_function_cannot_read_fails_with_what_it_needed() {
    let graph = entrypoint("double", |n: i64, _ctx: FunctionContext| async move {
        Ok(n * 2)
    })
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let error = graph
        .invoke(
            FunctionState::input("seven").unwrap(),
            RunConfig::new().thread("d"),
        )
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("function `double` cannot read its input `\"seven\"`"),
        "{text}"
    );
}
