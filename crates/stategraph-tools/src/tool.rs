//! Tools a model calls: a name, a description, a JSON schema derived from typed arguments, and
//! the code that runs.
//!
//! A [`Tool`] never fails the caller: whatever goes wrong (unknown tool, arguments that do not
//! fit the schema, the tool's own error) becomes the text of the tool's result, marked as an
//! error, so the model reads what went wrong and can try again. [`Toolbox::run`] is the one
//! place that turns a [`ToolCall`] into a [`ToolResult`].
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use stategraph_llm::ToolCall;
//! use stategraph_tools::tool::{tool_fn, Toolbox};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct AddArgs { a: i64, b: i64 }
//!
//! let add = tool_fn("add", "Add two integers", |args: AddArgs| async move {
//!     Ok::<_, String>((args.a + args.b).to_string())
//! });
//! let tools = Toolbox::new(vec![add]);
//! assert_eq!(tools.specs()[0].parameters["required"], serde_json::json!(["a", "b"]));
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let call = ToolCall { id: "c1".into(), name: "add".into(), arguments: serde_json::json!({"a": 2, "b": 3}) };
//! assert_eq!(tools.run(&call).await.content, "5");
//! let bad = ToolCall { arguments: serde_json::json!({"a": "two"}), ..call };
//! assert!(tools.run(&bad).await.is_error);
//! # });
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use stategraph_llm::{Message, ToolCall, ToolSpec};

/// A tool's failure, in words meant for the model (what went wrong, what to do instead).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub String);

impl ToolFailure {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolFailure(message.into())
    }
}

impl From<String> for ToolFailure {
    fn from(message: String) -> Self {
        ToolFailure(message)
    }
}

impl From<&str> for ToolFailure {
    fn from(message: &str) -> Self {
        ToolFailure(message.to_string())
    }
}

/// Something a model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by (letters, digits, `_`, `-`).
    fn name(&self) -> &str;

    /// What it does and when to use it; the model reads this.
    fn description(&self) -> &str;

    /// The JSON schema of its arguments object.
    fn parameters(&self) -> Value;

    /// Runs it. The arguments are the model's, unchecked: decode them and say what is wrong.
    async fn call(&self, arguments: Value) -> Result<String, ToolFailure>;

    /// The name shown to people (logs, plans, approval questions); the model's name unless
    /// the tool has a nicer one (an MCP server's `fs__read_file` is shown as `fs.read_file`).
    fn display_name(&self) -> &str {
        self.name()
    }

    /// What the model sees of it.
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name(), self.description(), self.parameters())
    }
}

/// A [`Tool`] made of a typed async function (see [`tool_fn`]).
pub struct FnTool<A, F> {
    name: String,
    description: String,
    parameters: Value,
    run: F,
    args: PhantomData<fn(A)>,
}

impl<A, F> fmt::Debug for FnTool<A, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

/// A tool from an async function of typed arguments `A`; the schema is derived from `A`
/// (schemars), and arguments that do not decode into `A` come back to the model as an error
/// naming the field.
pub fn tool_fn<A, F, Fut, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    run: F,
) -> Arc<dyn Tool>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, E>> + Send + 'static,
    E: Into<ToolFailure> + 'static,
{
    Arc::new(FnTool {
        name: name.into(),
        description: description.into(),
        parameters: stategraph_llm::schema_for::<A>(),
        run,
        args: PhantomData,
    })
}

/// Decodes a model's arguments into `A`, with an error naming the field that does not fit.
pub fn decode_args<A: DeserializeOwned>(arguments: Value) -> Result<A, ToolFailure> {
    if let Value::String(raw) = &arguments {
        return Err(ToolFailure(format!(
            "the arguments are not a JSON object (could not parse `{}`); call the tool again \
             with a JSON object matching its schema",
            raw.chars().take(200).collect::<String>()
        )));
    }
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let at = e.path().to_string();
        let at = if at == "." {
            String::new()
        } else {
            format!(" at `{at}`")
        };
        ToolFailure(format!(
            "invalid arguments{at}: {}; call the tool again with arguments matching its schema",
            e.inner()
        ))
    })
}

#[async_trait]
impl<A, F, Fut, E> Tool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, E>> + Send + 'static,
    E: Into<ToolFailure> + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(&self, arguments: Value) -> Result<String, ToolFailure> {
        let args: A = decode_args(arguments)?;
        (self.run)(args).await.map_err(Into::into)
    }
}

/// What one tool call produced: the text the model reads, and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The output, or the error message.
    pub content: String,
    /// True when the tool failed (the content says why).
    pub is_error: bool,
}

impl ToolResult {
    /// The [`Message`] that answers the call. An error's text starts with `Error:` so every
    /// provider's model sees it as one.
    pub fn into_message(self) -> Message {
        let content = if self.is_error {
            format!("Error: {}", self.content)
        } else {
            self.content
        };
        Message::tool_result(self.call_id, content)
    }
}

/// The tools offered to a model, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    order: Vec<String>,
}

impl fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.order).finish()
    }
}

impl Toolbox {
    /// These tools, offered in this order. A later tool with the same name replaces an earlier.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let mut toolbox = Toolbox::default();
        for tool in tools {
            toolbox.add(tool);
        }
        toolbox
    }

    /// Adds (or replaces) a tool.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.name().to_string();
        if !self.order.contains(&name) {
            self.order.push(name.clone());
        }
        self.tools.insert(name, tool);
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The name people are shown for the tool the model calls `name`
    /// ([`Tool::display_name`]); `name` itself for a tool it does not hold.
    ///
    /// ```
    /// use stategraph_tools::tool::{tool_fn, Toolbox};
    /// let echo = tool_fn("echo", "Echo", |s: String| async move { Ok::<_, String>(s) });
    /// let tools = Toolbox::new(vec![echo]);
    /// assert_eq!(tools.shown("echo"), "echo");
    /// assert_eq!(tools.shown("fs__read_file"), "fs__read_file");
    /// ```
    pub fn shown<'a>(&'a self, name: &'a str) -> &'a str {
        self.tools.get(name).map_or(name, |t| t.display_name())
    }

    /// The tools' names, in order.
    pub fn names(&self) -> &[String] {
        &self.order
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// What the model sees of every tool, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.order
            .iter()
            .filter_map(|n| self.tools.get(n))
            .map(|t| t.spec())
            .collect()
    }

    /// Runs one call. Never fails: an unknown tool, bad arguments or the tool's error become
    /// an error result the model reads.
    pub async fn run(&self, call: &ToolCall) -> ToolResult {
        let outcome = match self.tools.get(&call.name) {
            None => Err(ToolFailure(format!(
                "there is no tool named `{}`; the tools are: {}",
                call.name,
                self.order.join(", ")
            ))),
            Some(tool) => tool.call(call.arguments.clone()).await,
        };
        let (content, is_error) = match outcome {
            Ok(text) => (text, false),
            Err(ToolFailure(message)) => (message, true),
        };
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    struct Echo {
        /// What to echo.
        text: String,
        #[serde(default)]
        times: Option<u32>,
    }

    fn echo() -> Arc<dyn Tool> {
        tool_fn("echo", "Echo text", |a: Echo| async move {
            if a.text.is_empty() {
                return Err(ToolFailure::new("text is empty"));
            }
            Ok(a.text.repeat(a.times.unwrap_or(1) as usize))
        })
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
        }
    }

    #[tokio::test]
    async fn errors_of_every_kind_become_results_the_model_reads() {
        let tools = Toolbox::new(vec![echo()]);
        let ok = tools
            .run(&call("echo", json!({"text": "ab", "times": 2})))
            .await;
        assert_eq!((ok.content.as_str(), ok.is_error), ("abab", false));

        let failed = tools.run(&call("echo", json!({"text": ""}))).await;
        assert!(failed.is_error);
        assert_eq!(
            failed.clone().into_message().content,
            "Error: text is empty"
        );

        let bad = tools.run(&call("echo", json!({"times": 2}))).await;
        assert!(
            bad.is_error && bad.content.contains("missing field `text`"),
            "{}",
            bad.content
        );
        let typed = tools
            .run(&call("echo", json!({"text": "a", "times": "x"})))
            .await;
        assert!(typed.content.contains("at `times`"), "{}", typed.content);
        let raw = tools.run(&call("echo", json!("{oops"))).await;
        assert!(raw.content.contains("not a JSON object"), "{}", raw.content);

        let unknown = tools.run(&call("shout", json!({}))).await;
        assert!(unknown.is_error && unknown.content.contains("the tools are: echo"));
        assert_eq!(unknown.call_id, "c1");
    }

    #[test]
    fn the_schema_comes_from_the_argument_type() {
        let spec = echo().spec();
        assert_eq!(spec.name, "echo");
        assert_eq!(spec.parameters["properties"]["text"]["type"], "string");
        assert_eq!(spec.parameters["required"], json!(["text"]));
    }
}
