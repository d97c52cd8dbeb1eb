//! [`FakeChatModel`]: a scripted model for tests, yours and ours.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;

use super::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Message, ToolCall, Usage,
};

type ReplyFn = dyn Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync;

enum Script {
    Queue(VecDeque<Result<ChatResponse, LlmError>>),
    Function(Arc<ReplyFn>),
}

struct Inner {
    script: Script,
    requests: Vec<ChatRequest>,
}

/// A [`ChatModel`] that answers from a script: replies in order, or chosen by a function of
/// the request. It records every request it receives, can be scripted to fail, reports
/// usage (one token per word unless a scripted [`ChatResponse`] says otherwise), and streams
/// a reply word by word when the request has a sink.
///
/// ```
/// use serde_json::json;
/// use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel, LlmError, Message};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = FakeChatModel::new()
///     .then_tool_call("search", json!({"query": "rust"}))
///     .then_error(LlmError::Fake("boom".into()))
///     .then_text("Rust is a language.");
///
/// let first = model.chat(ChatRequest::new(vec![Message::user("Tell me about Rust")])).await?;
/// assert_eq!(first.message.tool_calls[0].name, "search");
/// assert!(model.chat(ChatRequest::default()).await.is_err());
/// let last = model.chat(ChatRequest::default()).await?;
/// assert_eq!(last.message.content, "Rust is a language.");
/// assert_eq!(model.requests()[0].messages[0].content, "Tell me about Rust");
/// # Ok::<(), LlmError>(()) });
/// ```
///
/// Replies chosen by a function:
///
/// ```
/// use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel, Message};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let echo = FakeChatModel::from_fn(|req| {
///     let last = req.messages.last().map(|m| m.content.clone()).unwrap_or_default();
///     Ok(FakeChatModel::text_reply(format!("you said: {last}")))
/// });
/// let reply = echo.chat(ChatRequest::new(vec![Message::user("hi")])).await?;
/// assert_eq!(reply.message.content, "you said: hi");
/// # Ok::<(), stategraph_llm::LlmError>(()) });
/// ```
pub struct FakeChatModel {
    // A std Mutex: it is never held across an await, and the fake must be usable from sync
    // test code (`requests()`).
    inner: Mutex<Inner>,
    model: String,
}

impl Default for FakeChatModel {
    fn default() -> Self {
        FakeChatModel::new()
    }
}

impl std::fmt::Debug for FakeChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeChatModel")
            .field("model", &self.model)
            .field("requests", &self.lock().requests.len())
            .finish()
    }
}

impl FakeChatModel {
    /// A fake with an empty script; add replies with the `then_*` methods.
    pub fn new() -> Self {
        FakeChatModel {
            inner: Mutex::new(Inner {
                script: Script::Queue(VecDeque::new()),
                requests: Vec::new(),
            }),
            model: "fake".to_string(),
        }
    }

    /// A fake that answers with these texts, in order.
    pub fn with_replies<I, S>(replies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        replies
            .into_iter()
            .fold(FakeChatModel::new(), |fake, text| fake.then_text(text))
    }

    /// A fake whose replies are computed from each request. Usage left at zero in the
    /// returned response is filled in by word count.
    pub fn from_fn<F>(reply: F) -> Self
    where
        F: Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync + 'static,
    {
        let fake = FakeChatModel::new();
        fake.lock().script = Script::Function(Arc::new(reply));
        fake
    }

    /// Names the model reported in responses (default `fake`).
    pub fn with_model_name(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Appends a text reply to the script.
    pub fn then_text(self, text: impl Into<String>) -> Self {
        self.then_response(FakeChatModel::text_reply(text))
    }

    /// Appends a reply calling one tool.
    pub fn then_tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        let n = self.scripted_len();
        let call = ToolCall {
            id: format!("call_{n}"),
            name: name.into(),
            arguments,
        };
        self.then_response(ChatResponse {
            message: Message::assistant_tool_calls("", vec![call]),
            usage: Usage::default(),
            model: String::new(),
            finish_reason: Some(FinishReason::ToolCalls),
        })
    }

    /// Appends a full response (its usage is kept if non-zero).
    pub fn then_response(self, response: ChatResponse) -> Self {
        self.push(Ok(response));
        self
    }

    /// Appends a failure.
    pub fn then_error(self, error: LlmError) -> Self {
        self.push(Err(error));
        self
    }

    /// Appends a reply to an existing fake (e.g. one shared in an `Arc`).
    pub fn push(&self, reply: Result<ChatResponse, LlmError>) {
        let mut inner = self.lock();
        match &mut inner.script {
            Script::Queue(queue) => queue.push_back(reply),
            Script::Function(_) => inner.script = Script::Queue(VecDeque::from([reply])),
        }
    }

    /// A plain text response, for use in [`from_fn`](Self::from_fn) closures.
    pub fn text_reply(text: impl Into<String>) -> ChatResponse {
        ChatResponse {
            message: Message::assistant(text),
            usage: Usage::default(),
            model: String::new(),
            finish_reason: Some(FinishReason::Stop),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// How many requests were received.
    pub fn call_count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Scripted replies not yet used (0 for a function-driven fake).
    pub fn remaining(&self) -> usize {
        self.scripted_len()
    }

    fn scripted_len(&self) -> usize {
        match &self.lock().script {
            Script::Queue(queue) => queue.len(),
            Script::Function(_) => 0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic in a test thread holding the lock must not hide the fake's history.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

#[async_trait]
impl ChatModel for FakeChatModel {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let reply = {
            let mut inner = self.lock();
            inner.requests.push(request.clone());
            let received = inner.requests.len();
            match &mut inner.script {
                Script::Queue(queue) => queue.pop_front().unwrap_or_else(|| {
                    Err(LlmError::Fake(format!(
                        "no scripted reply left for request #{received}"
                    )))
                }),
                Script::Function(f) => {
                    let f = Arc::clone(f);
                    // Run the user's function outside the lock so it may inspect the fake.
                    drop(inner);
                    f(&request)
                }
            }
        };
        let mut response = reply?;
        if response.model.is_empty() {
            response.model = self.model.clone();
        }
        if response.usage.tokens().is_empty() {
            let input = request.messages.iter().map(|m| words(&m.content)).sum();
            let output =
                words(&response.message.content) + response.message.tool_calls.len() as u64;
            response.usage = Usage::new(input, output);
        }
        // Each reply answers one request, whatever usage its script gave.
        response.usage.requests = 1;
        if let Some(sink) = &request.stream {
            for piece in response.message.content.split_inclusive(' ') {
                sink(piece);
            }
        }
        Ok(response)
    }
}
