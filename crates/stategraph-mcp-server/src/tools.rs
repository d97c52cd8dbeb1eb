//! The tools as a client sees them, and a call's arguments read into what to do. Every mistake
//! in the arguments names the argument; an input that does not fit the graph's state is left
//! to the graph to name (`runs.rs`), in the words of JSON.

use crate::error::ToolError;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};
use stategraph_registry::{input_schema, AnyFactory, Registry};
use std::sync::Arc;

/// The name of the tool that starts a run of graph `NAME` is this and the name: `run_NAME`.
pub const RUN_PREFIX: &str = "run_";
/// The tool that continues a thread, answering its pause.
pub const RESUME_THREAD: &str = "resume_thread";
/// The tool that reads a thread's state.
pub const READ_THREAD: &str = "read_thread";
/// The tool that lists the store's threads.
pub const LIST_THREADS: &str = "list_threads";

/// What a call asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Call {
    /// A new run of the registered graph `graph` with `input`.
    Run { graph: String, input: Value },
    /// `thread` continued, with `answer` to its pause when given.
    Resume {
        thread: String,
        answer: Option<Value>,
    },
    /// `thread`'s state.
    Read { thread: String },
    /// Every thread.
    List,
}

/// Every tool: one per registered graph, then the thread tools.
pub(crate) fn list(registry: &Registry) -> Vec<Tool> {
    let mut tools: Vec<Tool> = registry.iter().map(|f| run_tool(f.as_ref())).collect();
    tools.push(
        Tool::new(
            RESUME_THREAD,
            "Continue a thread of a graph run: answer the question it paused on (the `answer` \
             the question asks for, e.g. \"yes\"), or, without an answer, go on after a stop or \
             a failure. Steps it already saved are not run again. Returns like a run: the \
             thread's next questions, or its result.",
            schema(json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string", "description": "the thread, as a run returned it or list_threads lists it"},
                    "answer": {"description": "the answer to the question the thread waits on (text, or JSON when the question asks for it)"},
                },
                "required": ["thread_id"],
            })),
        )
        .annotate(ToolAnnotations::new().destructive(false)),
    );
    tools.push(
        Tool::new(
            READ_THREAD,
            "Read a thread: where it stands (paused, done, failed, stopped), its state, the \
             questions it waits on and what runs next.",
            schema(json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string", "description": "the thread"},
                },
                "required": ["thread_id"],
            })),
        )
        .annotate(ToolAnnotations::new().read_only(true)),
    );
    tools.push(
        Tool::new(
            LIST_THREADS,
            "List the threads of the store, newest first: each one's graph, status and step.",
            schema(json!({"type": "object", "properties": {}})),
        )
        .annotate(ToolAnnotations::new().read_only(true)),
    );
    tools
}

fn run_tool(factory: &dyn AnyFactory) -> Tool {
    let description = format!(
        "Start a run of graph `{name}` on a new thread: {what}. The arguments are the run's \
         input. A run that pauses for a person returns its question and the thread id: answer \
         with {RESUME_THREAD}. Progress goes out as progress notifications.",
        name = factory.name(),
        what = factory.description(),
    );
    Tool::new(
        format!("{RUN_PREFIX}{}", factory.name()),
        description,
        schema(input_schema(factory)),
    )
    .annotate(ToolAnnotations::new().destructive(false).idempotent(false))
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        // The schemas above are objects; an empty one accepts anything.
        _ => Arc::new(JsonObject::new()),
    }
}

/// Reads a call of tool `name`; `None` when no tool has that name.
pub(crate) fn parse(
    registry: &Registry,
    name: &str,
    arguments: Option<JsonObject>,
) -> Option<Result<Call, ToolError>> {
    let args = arguments.unwrap_or_default();
    if let Some(graph) = name.strip_prefix(RUN_PREFIX) {
        registry.get(graph)?;
        return Some(Ok(Call::Run {
            graph: graph.to_string(),
            input: Value::Object(args),
        }));
    }
    let call = match name {
        RESUME_THREAD => thread_id(&args).map(|thread| Call::Resume {
            thread,
            answer: args.get("answer").cloned(),
        }),
        READ_THREAD => thread_id(&args).map(|thread| Call::Read { thread }),
        LIST_THREADS => Ok(Call::List),
        _ => return None,
    };
    Some(call)
}

fn thread_id(args: &JsonObject) -> Result<String, ToolError> {
    match args.get("thread_id") {
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id.clone()),
        Some(Value::String(_)) => Err(ToolError::argument(
            "thread_id",
            "empty: give the thread's id (list_threads lists them)",
        )),
        Some(other) => Err(ToolError::argument(
            "thread_id",
            format!("expected the thread's id as a text, not {other}"),
        )),
        None => Err(ToolError::argument(
            "thread_id",
            "missing: give the thread's id (a run returns it; list_threads lists them)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.extend(stategraph_agents::builtin_factories());
        r
    }

    fn args(v: Value) -> Option<JsonObject> {
        v.as_object().cloned()
    }

    #[test]
    fn each_graph_is_a_tool_with_its_input_schema() {
        let tools = list(&registry());
        let run = tools.iter().find(|t| t.name == "run_pipeline").unwrap();
        assert_eq!(run.input_schema["required"], json!(["topic"]));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for name in [RESUME_THREAD, READ_THREAD, LIST_THREADS] {
            assert!(names.contains(&name), "{names:?}");
        }
    }

    #[test]
    fn calls_are_read_and_mistakes_name_the_argument() {
        let r = registry();
        let run = parse(&r, "run_pipeline", args(json!({"topic": "sled"})));
        assert_eq!(
            run.unwrap().unwrap(),
            Call::Run {
                graph: "pipeline".into(),
                input: json!({"topic": "sled"})
            }
        );
        assert!(parse(&r, "run_nothing", None).is_none());
        assert!(parse(&r, "nothing", None).is_none());
        let e = parse(&r, RESUME_THREAD, args(json!({"answer": "yes"})))
            .unwrap()
            .unwrap_err();
        assert!(e.0.starts_with("argument `thread_id`: missing"), "{e}");
        let e = parse(&r, READ_THREAD, args(json!({"thread_id": 7})))
            .unwrap()
            .unwrap_err();
        assert!(e.0.contains("not 7"), "{e}");
    }
}
