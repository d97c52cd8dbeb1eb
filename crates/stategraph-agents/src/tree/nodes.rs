//! The graph's nodes. Each reads the files again, so what a person changed between two steps
//! (or while the thread was stopped) is what the next step works from.

use super::decompose::{decompose_request, prepare, to_decompose, TaskPlan};
use super::disk::write_atomic;
use super::paths::plan_path;
use super::plan_file::PlanFile;
use super::prompts;
use super::reading::reading_tools;
use super::settings::TreeSettings;
use super::solve::{inputs, progress_text, solve_request, SolvePlan};
use super::state::{CurrentTask, Mode, SolvedTask, TreeState, TreeStateUpdate};
use super::task_tree::{TaskTree, TreeView};
use super::TreeAgent;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{
    structured_validated, ChatRequest, Message, StructuredOptions, Usage, UsageLedger,
};
use stategraph_prebuilt::asked_node_error;
use stategraph_spend as spend;
use std::path::Path;
use std::sync::Arc;

fn settings(ctx: &Context) -> Result<TreeSettings, NodeError> {
    TreeSettings::from_map(ctx.settings()).map_err(|e| NodeError::new(e.to_string()))
}

fn load(task: &str) -> Result<TaskTree, NodeError> {
    TaskTree::load(Path::new(task)).map_err(|e| NodeError::new(e.to_string()))
}

fn io_error(what: &str, e: std::io::Error) -> NodeError {
    NodeError::new(format!("{what}: {e}"))
}

/// A ledger holding one call of `node` (the state's reducer adds it to the run's); a call
/// a resume got from the journal (recorded under `key`) is counted as reused, not paid again,
/// and what the failed attempts kept under `spent_under` in earlier attempts or runs of the
/// task paid for is added ([`spend`]).
async fn ledger(
    ctx: &Context,
    (key, spent_under): (&str, &[&str]),
    usage: Usage,
    settings: &TreeSettings,
) -> Result<UsageLedger, NodeError> {
    let mut ledger = UsageLedger::default();
    let pricing = settings.llm.pricing.as_ref();
    if ctx.was_replayed(key) {
        ledger.record_reused(ctx.node(), usage, pricing);
    } else {
        ledger.record(ctx.node(), usage, pricing);
    }
    for spent in spent_under {
        spend::add_failed(ctx, spent, ctx.node(), &mut ledger, pricing).await?;
    }
    Ok(ledger)
}

/// Where a `decompose` task keeps what its failed decomposition requests paid for: one key,
/// whatever file and hash they asked about. The step decomposes once, so its success adds all
/// of them; under the call's own key (which names the file's hash) a file edited between the
/// failed run and its resume would leave them in no ledger.
const DECOMPOSITION_SPEND: &str = "decomposition";

fn system(custom: &Option<String>, builtin: &str) -> Message {
    Message::system(custom.clone().unwrap_or_else(|| builtin.to_string()))
}

/// `decompose`: one decomposition call per step, depth-first through complex tasks without
/// children, until none is left or the node limit is reached.
pub(crate) async fn decompose(
    agent: &TreeAgent,
    s: Arc<TreeState>,
    ctx: Context,
) -> Result<TreeStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let tree = load(&s.task)?;
    let max = s.max_nodes.unwrap_or(settings.max_nodes) as usize;
    let candidates = to_decompose(&tree, &s.decomposed);
    let Some(&target) = candidates.first() else {
        return Ok(TreeStateUpdate::default()
            .decompose_done(true)
            .not_decomposed(Vec::new())
            .log(vec!["nothing left to decompose".to_string()]));
    };
    if s.decomposed.len() >= max {
        let left: Vec<String> = candidates
            .iter()
            .map(|&i| tree.task(i).path.clone())
            .collect();
        return Ok(TreeStateUpdate::default()
            .decompose_done(true)
            .log(vec![format!(
                "node limit of {max} reached; not decomposed: {}",
                left.join(", ")
            )])
            .not_decomposed(left));
    }
    let task = tree.task(target);
    let max_children = settings.max_children;
    let (plan, key, usage) = ask_for_plan(agent, &ctx, &tree, target, &settings).await?;
    let files = prepare(&plan, &tree, target, max_children).map_err(|e| {
        NodeError::new(format!(
            "the recorded decomposition of {} no longer fits the files: {e}",
            task.path
        ))
    })?;
    let report = files
        .write(&tree)
        .map_err(|e| io_error(&format!("writing the decomposition of {}", task.path), e))?;
    let mut decomposed = s.decomposed.clone();
    decomposed.push(task.path.clone());
    let mut log = vec![format!(
        "decomposed {} into {} children",
        task.path,
        files.children.len()
    )];
    for kept in &report.kept {
        log.push(format!(
            "kept {kept} as it was (a file of that name existed)"
        ));
    }
    let after = load(&s.task)?;
    let left: Vec<String> = to_decompose(&after, &decomposed)
        .into_iter()
        .map(|i| after.task(i).path.clone())
        .collect();
    let done = left.is_empty() || decomposed.len() >= max;
    if done && !left.is_empty() {
        log.push(format!(
            "node limit of {max} reached; not decomposed: {}",
            left.join(", ")
        ));
    }
    Ok(TreeStateUpdate::default()
        .decomposed(decomposed)
        .decompose_done(done)
        .not_decomposed(if done { left } else { Vec::new() })
        // The call's own key too: where a task that failed before this key existed kept them.
        .usage(ledger(&ctx, (&key, &[DECOMPOSITION_SPEND, &key]), usage, &settings).await?)
        .log(log))
}

/// Asks the model to decompose task `target` of `tree`, journaled under a key naming the file
/// and its hash, so a file edited while the thread was stopped is asked about anew.
async fn ask_for_plan(
    agent: &TreeAgent,
    ctx: &Context,
    tree: &TaskTree,
    target: usize,
    settings: &TreeSettings,
) -> Result<(TaskPlan, String, Usage), NodeError> {
    let task = tree.task(target);
    let max_children = settings.max_children;
    let messages = vec![
        system(&settings.prompts.decompose, prompts::DECOMPOSE),
        Message::user(decompose_request(tree, target, max_children)),
    ];
    let mut opts = StructuredOptions::default().with_name("TaskPlan");
    opts.temperature = settings.llm.temperature;
    let model = agent.model.clone();
    let key = format!("decompose {} {}", task.path, &task.hash[..16]);
    let pricing = settings.llm.pricing.as_ref();
    let (plan, usage): (TaskPlan, Usage) = ctx
        .record(&key, || async move {
            let reply = structured_validated(model.as_ref(), messages, opts, |p: &TaskPlan| {
                prepare(p, tree, target, max_children).map(|_| ())
            })
            .await;
            match reply {
                Ok(reply) => Ok(reply),
                Err(e) => Err(
                    spend::failed_call(ctx, DECOMPOSITION_SPEND, e, pricing, |e| {
                        asked_node_error(&format!("decomposing {}", task.path), e)
                    })
                    .await,
                ),
            }
        })
        .await?;
    Ok((plan, key, usage))
}

/// `review`: pauses with the tree so a person can edit the files; any answer goes on to solve.
pub(crate) async fn review(s: Arc<TreeState>, ctx: Context) -> Result<TreeStateUpdate, NodeError> {
    let tree = load(&s.task)?;
    let payload = serde_json::json!({
        "message": "The tree is decomposed. Review and edit the task files (text, simple/complex, \
                    children, dependency links), then solve it.",
        "tree": tree.render(&TreeView::default()),
        "problems": tree.problems().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "decomposed": s.decomposed,
        "not_decomposed": s.not_decomposed,
    });
    let _answer: serde_json::Value = ctx.interrupt(payload).await?;
    Ok(TreeStateUpdate::default()
        .mode(Mode::Solve)
        .log(vec!["reviewed; solving".to_string()]))
}

/// `next_task`: reads and checks the tree, and picks the next task to solve (post-order), or
/// ends with the root's result.
pub(crate) async fn next_task(
    s: Arc<TreeState>,
    ctx: Context,
) -> Result<TreeStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let tree =
        TaskTree::load_solvable(Path::new(&s.task)).map_err(|e| NodeError::new(e.to_string()))?;
    let plan = SolvePlan::new(&tree, &s.solved);
    let Some((i, reason)) = plan.next().cloned() else {
        let root = &tree.task(0).path;
        let result = s.solved_task(root).map(|r| r.result.clone());
        return Ok(TreeStateUpdate::default()
            .current(None)
            .result(result)
            .log(vec!["the tree is solved".to_string()]));
    };
    let task = tree.task(i);
    let request = solve_request(&tree, &plan, &s.solved, i, settings.max_result_chars);
    write_progress(&tree, &plan, &s.solved, i, &ctx, Some(ctx.step()))?;
    Ok(TreeStateUpdate::default()
        .current(Some(CurrentTask {
            path: task.path.clone(),
            title: task.file.title.clone(),
            file_hash: task.hash.clone(),
            fingerprint: plan.fingerprint(i).to_string(),
            inputs: inputs(&tree, i),
            reason: reason.to_string(),
            messages: vec![
                system(&settings.prompts.solve, prompts::SOLVE),
                Message::user(request),
            ],
            result: None,
        }))
        .log(vec![format!("solving {}: {reason}", task.path)]))
}

/// `work`: the model solves the current task, reading other files of the tree with the
/// reading tools when it wants to (at most `limits.max_rounds` model calls; the last offers no
/// tools, so it must answer). Each call is journaled under the task's key and its round, so a
/// resume after a kill does not pay for an answer already given; the reads are not journaled:
/// they cost nothing and a resume should see the files as they are.
pub(crate) async fn work(
    agent: &TreeAgent,
    s: Arc<TreeState>,
    ctx: Context,
) -> Result<TreeStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let mut current = s
        .current
        .clone()
        .ok_or_else(|| NodeError::new("`work` ran with no current task"))?;
    let root = Path::new(&s.task).parent().unwrap_or(Path::new("."));
    let tools = reading_tools(root).map_err(|e| NodeError::new(e.to_string()))?;
    let base_key = format!("solve {} {}", current.path, &current.fingerprint[..16]);
    let mut messages = current.messages.clone();
    let mut usage = UsageLedger::default();
    for round in 0..settings.limits.max_rounds {
        // Round 0 keeps the key a single-call solve was journaled under.
        let key = match round {
            0 => base_key.clone(),
            n => format!("{base_key} round {n}"),
        };
        let mut request = ChatRequest::new(messages.clone());
        if round + 1 < settings.limits.max_rounds {
            request = request.with_tools(tools.specs());
        }
        request.temperature = settings.llm.temperature;
        request.stream = ctx.text_sink(stategraph::runtime::TOKEN_EVENT);
        let (reply, call_usage) = ask(agent, &ctx, &key, request, &current.path).await?;
        usage.merge(&ledger(&ctx, (&key, &[&key]), call_usage, &settings).await?);
        if reply.tool_calls.is_empty() {
            current.result = Some(reply.content);
            break;
        }
        let calls = reply.tool_calls.clone();
        messages.push(reply);
        for call in &calls {
            messages.push(tools.run(call).await.into_message());
        }
    }
    if current.result.is_none() {
        return Err(NodeError::new(format!(
            "solving {}: the model was still reading files after {} calls (limits.max_rounds); \
             raise it or make the task file say more",
            current.path, settings.limits.max_rounds
        )));
    }
    Ok(TreeStateUpdate::default()
        .current(Some(current))
        .usage(usage))
}

/// One journaled model call of a solve: its reply message and usage.
async fn ask(
    agent: &TreeAgent,
    ctx: &Context,
    key: &str,
    request: ChatRequest,
    path: &str,
) -> Result<(Message, Usage), NodeError> {
    let model = agent.model.clone();
    let path = path.to_string();
    ctx.record(key, || async move {
        let reply = model
            .chat(request)
            .await
            .map_err(|e| asked_node_error(&format!("solving {path}"), e))?;
        Ok::<_, NodeError>((reply.message, reply.usage))
    })
    .await
}

/// `finish_task`: records the current task as solved and writes its plan file (`## Progress`
/// and `## Result`) and the progress of its ancestors.
pub(crate) async fn finish_task(
    s: Arc<TreeState>,
    ctx: Context,
) -> Result<TreeStateUpdate, NodeError> {
    let current = s
        .current
        .clone()
        .ok_or_else(|| NodeError::new("`finish_task` ran with no current task"))?;
    let result = current.result.clone().unwrap_or_default();
    let record = SolvedTask {
        path: current.path.clone(),
        title: current.title.clone(),
        file_hash: current.file_hash.clone(),
        fingerprint: current.fingerprint.clone(),
        inputs: current.inputs.clone(),
        result: result.clone(),
        step: ctx.step(),
    };
    let mut solved = s.solved.clone();
    solved.retain(|r| r.path != record.path);
    solved.push(record.clone());
    let tree = load(&s.task)?;
    if let Some(i) = tree.find(&current.path) {
        let plan = SolvePlan::new(&tree, &solved);
        let path = tree.file_path(&plan_path(&current.path));
        let mut file = read_plan(&path, &current.title);
        file.set(
            "Progress",
            &progress_text(&tree, &plan, &solved, i, ctx.thread_id(), None),
        );
        file.set("Result", &result);
        write_atomic(&path, &file.text())
            .map_err(|e| io_error(&format!("writing {}", path.display()), e))?;
        let ancestors = std::iter::successors(tree.task(i).parent, |&a| tree.task(a).parent);
        for a in ancestors {
            write_progress(&tree, &plan, &solved, a, &ctx, None)?;
        }
    }
    Ok(TreeStateUpdate::default()
        .solved(vec![record])
        .current(None)
        .log(vec![format!("solved {}", current.path)]))
}

fn read_plan(path: &Path, title: &str) -> PlanFile {
    std::fs::read_to_string(path)
        .map(|t| PlanFile::parse(&t))
        .unwrap_or_else(|_| PlanFile::new(title))
}

/// Rewrites the `## Progress` of task `i`'s plan file.
fn write_progress(
    tree: &TaskTree,
    plan: &SolvePlan,
    solved: &[SolvedTask],
    i: usize,
    ctx: &Context,
    solving: Option<u64>,
) -> Result<(), NodeError> {
    let task = tree.task(i);
    let path = tree.file_path(&plan_path(&task.path));
    let mut file = read_plan(&path, &task.file.title);
    file.set(
        "Progress",
        &progress_text(tree, plan, solved, i, ctx.thread_id(), solving),
    );
    write_atomic(&path, &file.text())
        .map_err(|e| io_error(&format!("writing {}", path.display()), e))
}
