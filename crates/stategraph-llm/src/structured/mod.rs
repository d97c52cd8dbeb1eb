//! Typed replies ("structured output").
//!
//! [`structured`] derives a JSON schema from a Rust type with schemars, asks the model for a
//! reply matching it, and parses the reply into the type. A reply that does not parse, or
//! does not match the schema, is shown back to the model with the error, a bounded number of
//! times, before the call fails with [`LlmError::Structured`].
//!
//! The schema can be replaced at run time: the research agent narrows a field to the ids it
//! actually has, so the model cannot invent one:
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use stategraph_llm::{schema_for, structured, FakeChatModel, Message, StructuredOptions};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Pick { source_id: String, reason: String }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut schema = schema_for::<Pick>();
//! schema["properties"]["source_id"]["enum"] = json!(["s1", "s2"]);
//!
//! let model = FakeChatModel::with_replies([
//!     r#"{"source_id": "s9", "reason": "made up"}"#,   // not an allowed id: retried
//!     r#"{"source_id": "s2", "reason": "most recent"}"#,
//! ]);
//! let (pick, usage): (Pick, _) = structured(
//!     &model,
//!     vec![Message::user("Which source is best?")],
//!     StructuredOptions::default().with_schema(schema),
//! ).await?;
//! assert_eq!(pick.source_id, "s2");
//! assert_eq!(model.requests().len(), 2);
//! # let _ = (pick.reason, usage);
//! # Ok::<(), stategraph_llm::LlmError>(()) });
//! ```

mod options;
mod reply;
mod schema;
mod validate;

pub use options::StructuredOptions;
pub(crate) use schema::sanitize_name;
pub use schema::{schema_for, strict_schema};
pub use validate::validate_value;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::{ChatModel, ChatRequest, JsonSchemaFormat, LlmError, Message, Usage};
use reply::parse_reply;

/// Asks `model` for a reply of type `T` and parses it. Returns the value and the usage of
/// all attempts together (`usage.requests` says how many there were); when no attempt fits,
/// the [`LlmError::Structured`] carries that usage instead, since every attempt was billed, and
/// a request that fails after answered attempts is an [`LlmError::AfterAnswers`] that keeps
/// theirs. See the [module docs](self) for an example.
pub async fn structured<T>(
    model: &dyn ChatModel,
    messages: Vec<Message>,
    opts: StructuredOptions,
) -> Result<(T, Usage), LlmError>
where
    T: JsonSchema + DeserializeOwned,
{
    structured_validated(model, messages, opts, |_: &T| Ok(())).await
}

/// Like [`structured`], plus a check of the parsed value; a rejected value is sent back to
/// the model with `validate`'s message, like a parse error.
///
/// ```
/// # use stategraph_llm::*;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Score { value: u8 }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = FakeChatModel::with_replies([r#"{"value": 11}"#, r#"{"value": 7}"#]);
/// let (score, _) = structured_validated(
///     &model,
///     vec![Message::user("Rate it from 0 to 10")],
///     StructuredOptions::default(),
///     |s: &Score| if s.value <= 10 { Ok(()) } else { Err("value must be at most 10".into()) },
/// ).await?;
/// assert_eq!(score.value, 7);
/// # Ok::<(), LlmError>(()) });
/// ```
pub async fn structured_validated<T, F>(
    model: &dyn ChatModel,
    mut messages: Vec<Message>,
    opts: StructuredOptions,
    validate: F,
) -> Result<(T, Usage), LlmError>
where
    T: JsonSchema + DeserializeOwned,
    F: Fn(&T) -> Result<(), String>,
{
    let name = sanitize_name(&opts.name.clone().unwrap_or_else(T::schema_name));
    let schema = opts.schema.clone().unwrap_or_else(schema_for::<T>);
    let format = JsonSchemaFormat::strict(name.clone(), schema.clone());
    let mut usage = Usage::default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut request = ChatRequest::new(messages.clone()).with_response_format(format.clone());
        request.temperature = opts.temperature;
        request.max_tokens = opts.max_tokens;
        request.stream = opts.stream.clone();
        // A failure after answered attempts keeps what they used: they were billed.
        let response = match model.chat(request).await {
            Ok(response) => response,
            Err(e) => return Err(e.after_answers(usage)),
        };
        usage += response.usage;
        let reply = response.message.content;
        let error = match parse_reply::<T>(&reply, &schema) {
            Ok(value) => match validate(&value) {
                Ok(()) => return Ok((value, usage)),
                Err(e) => e,
            },
            Err(e) => e,
        };
        tracing::debug!(schema = %name, attempt, %error, "structured reply rejected");
        if attempt > opts.max_retries {
            return Err(LlmError::Structured {
                name,
                attempts: attempt,
                error,
                last_reply: reply,
                usage,
            });
        }
        messages.push(Message::assistant(reply));
        messages.push(Message::user(format!(
            "Your reply could not be used: {error}. Reply again with only a JSON object \
             that matches the `{name}` schema."
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, JsonSchema)]
    struct Pick {
        id: String,
    }

    fn fits(p: &Pick) -> Result<(), String> {
        match p.id.as_str() {
            "a" | "b" => Ok(()),
            other => Err(format!("`{other}` is not an id")),
        }
    }

    #[tokio::test]
    async fn every_attempt_is_counted_when_a_retry_succeeds() {
        let model = crate::FakeChatModel::with_replies([
            "no json at all",
            r#"{"id": "z"}"#,
            r#"{"id": "a"}"#,
        ]);
        let (pick, usage): (Pick, Usage) = structured_validated(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default(),
            fits,
        )
        .await
        .unwrap();
        assert_eq!(pick.id, "a");
        assert_eq!(model.call_count(), 3);
        assert_eq!(usage.requests, 3, "three requests were answered: {usage:?}");
        // The fake counts one input token per word: each retry resends the conversation so far.
        assert!(usage.input_tokens > 3 * 2, "{usage:?}");
    }

    #[tokio::test]
    async fn a_reply_that_never_fits_reports_what_its_attempts_used() {
        let model = crate::FakeChatModel::with_replies([r#"{"id": "x"}"#, r#"{"id": "y"}"#]);
        let err = structured_validated::<Pick, _>(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default().with_max_retries(1),
            fits,
        )
        .await
        .unwrap_err();
        assert_eq!(model.call_count(), 2);
        let usage = err.usage().expect("a structured failure says what it used");
        assert_eq!(usage.requests, 2);
        assert!(usage.output_tokens >= 2, "{usage:?}");
    }

    #[tokio::test]
    async fn a_retry_that_fails_keeps_what_the_answered_attempts_used() {
        let model =
            crate::FakeChatModel::with_replies([r#"{"id": "x"}"#]).then_error(LlmError::Stream {
                provider: "fake".into(),
                detail: "connection reset".into(),
            });
        let err = structured_validated::<Pick, _>(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default(),
            fits,
        )
        .await
        .unwrap_err();
        assert_eq!(model.call_count(), 2);
        let usage = err.usage().expect("the answered attempt was billed");
        assert_eq!(usage.requests, 1, "{usage:?}");
        assert!(
            usage.input_tokens > 0 && usage.output_tokens > 0,
            "{usage:?}"
        );
        // Still the stream's error in every other respect: retryable, and said as it was.
        assert!(matches!(err.cause(), LlmError::Stream { .. }), "{err:?}");
        assert!(err.should_retry());
        assert!(!err.is_about_the_reply());
        assert_eq!(err.to_string(), err.cause().to_string());
    }

    #[tokio::test]
    async fn a_failure_before_any_reply_reports_no_usage() {
        let model =
            crate::FakeChatModel::new().then_error(LlmError::Fake("connection refused".into()));
        let err = structured::<Pick>(&model, vec![Message::user("pick")], Default::default())
            .await
            .unwrap_err();
        assert_eq!(err.usage(), None);
    }
}
