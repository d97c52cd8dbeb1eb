//! Token usage and cost: per call ([`Usage`]), per node and per thread ([`UsageLedger`]).
//!
//! A ledger is plain serialisable data meant to live in a graph's state, so it is saved with
//! every checkpoint of the thread and a user can see what a run cost (and, after a resume,
//! that the nodes restored from a checkpoint cost nothing again).

use std::collections::BTreeMap;
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens used by one or more model requests, and how many requests they were spent in.
///
/// Every request the model answered counts: a structured reply that did not validate and was
/// asked for again is two requests, both billed. Requests the server refused (429, 5xx) and
/// the HTTP client sent again are not counted: they produced nothing and cost nothing.
///
/// ```
/// use stategraph_llm::Usage;
/// let total = Usage::new(100, 20) + Usage::new(50, 5);
/// assert_eq!((total.input_tokens, total.output_tokens), (150, 25));
/// assert_eq!(total.requests, 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (for Anthropic, cached prompt tokens included).
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Model requests answered. 0 in a usage saved before requests were counted (a ledger
    /// counts such a record as one call).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
}

impl Usage {
    /// True when no token and no request was counted.
    pub fn is_empty(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0 && self.requests == 0
    }

    /// What one request used: `input_tokens` in, `output_tokens` out.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            requests: 1,
        }
    }

    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The same tokens without a request count: what a ledger keeps next to its `calls`.
    pub fn tokens(&self) -> Usage {
        Usage {
            requests: 0,
            ..*self
        }
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            requests: self.requests.saturating_add(other.requests),
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

impl Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), Add::add)
    }
}

/// Prices of a model, in US dollars per million tokens: costs are shown as `USD 0.0123`.
///
/// ```
/// use stategraph_llm::{Pricing, Usage};
/// let price = Pricing { input_per_million: 3.0, output_per_million: 15.0 };
/// assert_eq!(price.cost(Usage::new(1_000_000, 100_000)), 4.5);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pricing {
    /// Price of a million input tokens, in US dollars.
    pub input_per_million: f64,
    /// Price of a million output tokens, in US dollars.
    pub output_per_million: f64,
}

impl Pricing {
    /// The cost of `usage` at these prices.
    pub fn cost(&self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_million
            + usage.output_tokens as f64 * self.output_per_million)
            / 1_000_000.0
    }
}

/// What one node (or a whole thread) used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// Model requests made: every request the model answered, retries of an unusable reply
    /// included, so it matches what the provider bills.
    pub calls: u64,
    /// Tokens used (its `requests` stays 0: `calls` counts them).
    pub usage: Usage,
    /// Cost of the calls that had a price; `None` when none had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Calls made without a configured price, so not included in `cost`.
    #[serde(default)]
    pub unpriced_calls: u64,
    /// Calls a resume did not pay for again: their recorded results were reused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replayed_calls: u64,
    /// Tokens of those reused calls (counted once, in `usage`, when they were made).
    #[serde(default, skip_serializing_if = "Usage::is_empty")]
    pub replayed: Usage,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The calls a recorded usage stands for: its requests, and at least one, because a usage
/// saved before requests were counted (a journaled reply of an older run) has none.
fn calls_in(usage: Usage) -> u64 {
    usage.requests.max(1)
}

impl NodeUsage {
    /// Adds `usage`; returns how many calls it counted.
    fn record(&mut self, usage: Usage, pricing: Option<&Pricing>) -> u64 {
        let calls = calls_in(usage);
        self.calls += calls;
        self.usage += usage.tokens();
        match pricing {
            Some(price) => self.cost = Some(self.cost.unwrap_or(0.0) + price.cost(usage)),
            None => self.unpriced_calls += calls,
        }
        calls
    }

    fn merge(&mut self, other: &NodeUsage) {
        self.calls += other.calls;
        self.usage += other.usage;
        self.unpriced_calls += other.unpriced_calls;
        self.replayed_calls += other.replayed_calls;
        self.replayed += other.replayed;
        self.cost = match (self.cost, other.cost) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// Usage per node of a thread, with totals. Serialisable: keep it in graph state.
///
/// [`merge`](Self::merge) adds another ledger, so parallel branches can each report the
/// usage of their own calls and the engine combines them. A branch's update must therefore
/// carry only its new calls, not a copy of the ledger it started from.
///
/// ```
/// use stategraph_llm::{Pricing, Usage, UsageLedger};
/// let price = Pricing { input_per_million: 1.0, output_per_million: 2.0 };
/// let mut ledger = UsageLedger::default();
/// ledger.record("plan", Usage::new(1000, 200), Some(&price));
/// let mut branch = UsageLedger::default();
/// branch.record("search", Usage::new(500, 50), None);
/// ledger.merge(&branch);
/// assert_eq!(ledger.total().usage, Usage::new(1500, 250).tokens());
/// assert_eq!(ledger.total().calls, 2);
/// assert_eq!(ledger.total().unpriced_calls, 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageLedger {
    /// Usage per node name.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeUsage>,
}

impl UsageLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        UsageLedger::default()
    }

    /// Records what a call made by `node` used: each of its `usage.requests` is one call (a
    /// structured reply asked for three times is three). Its cost is counted when `pricing` is
    /// given.
    ///
    /// ```
    /// use stategraph_llm::{Usage, UsageLedger};
    /// let mut ledger = UsageLedger::default();
    /// // An unusable reply, then a good one: two requests, both billed.
    /// ledger.record("plan", Usage::new(100, 20) + Usage::new(130, 25), None);
    /// assert_eq!(ledger.total().calls, 2);
    /// assert_eq!(ledger.total().usage.input_tokens, 230);
    /// ```
    pub fn record(&mut self, node: &str, usage: Usage, pricing: Option<&Pricing>) {
        self.nodes
            .entry(node.to_string())
            .or_default()
            .record(usage, pricing);
        // What the call cost, where a price is known: an event in the node's span, so a trace
        // shows it beside the node's model calls.
        if let Some(price) = pricing {
            tracing::info!(
                node,
                input_tokens = usage.input_tokens,
                output_tokens = usage.output_tokens,
                cost_usd = price.cost(usage),
                "model usage priced"
            );
        }
    }

    /// Records a call answered from the journal by a resumed run: the run that paid for it died
    /// before its update was saved, so its tokens count once, here, and are also marked as
    /// reused: what the resume saved.
    ///
    /// ```
    /// use stategraph_llm::{Usage, UsageLedger};
    /// let mut ledger = UsageLedger::default();
    /// ledger.record_reused("summarise", Usage::new(800, 120), None);
    /// assert_eq!(ledger.total().calls, 1);
    /// assert_eq!(ledger.total().replayed_calls, 1);
    /// ```
    pub fn record_reused(&mut self, node: &str, usage: Usage, pricing: Option<&Pricing>) {
        let entry = self.nodes.entry(node.to_string()).or_default();
        entry.replayed_calls += entry.record(usage, pricing);
        entry.replayed += usage.tokens();
    }

    /// Adds every entry of `other` to this ledger.
    pub fn merge(&mut self, other: &UsageLedger) {
        for (node, usage) in &other.nodes {
            self.nodes.entry(node.clone()).or_default().merge(usage);
        }
    }

    /// This ledger plus `other`, as a new ledger (for reducer-style merges).
    pub fn merged(mut self, other: &UsageLedger) -> UsageLedger {
        self.merge(other);
        self
    }

    /// What `node` used, if it made any call.
    pub fn node(&self, node: &str) -> Option<&NodeUsage> {
        self.nodes.get(node)
    }

    /// The sum over all nodes.
    pub fn total(&self) -> NodeUsage {
        let mut total = NodeUsage::default();
        for usage in self.nodes.values() {
            total.merge(usage);
        }
        total
    }

    /// True when no call was recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// A small table: one line per node, then the total.
/// The `model_call` span of one request to a model (exported as a trace by
/// `stategraph-otel`); [`traced`] runs the call in it and records the tokens it used.
///
/// ```
/// let span = stategraph_llm::accounting::model_call_span("Anthropic", "claude-sonnet-4-5");
/// # let _ = span;
/// ```
pub fn model_call_span(provider: &str, model: &str) -> tracing::Span {
    tracing::info_span!(
        "model_call",
        provider,
        model,
        input_tokens = tracing::field::Empty,
        output_tokens = tracing::field::Empty
    )
}

/// Runs a model call inside `span`, recording the tokens it used there when it answered.
///
/// ```
/// # use stategraph_llm::{accounting::{model_call_span, traced}, Usage};
/// # async fn run() {
/// let usage = traced(model_call_span("OpenAI-compatible API", "gpt-4o-mini"), async {
///     Ok::<_, ()>(Usage::new(10, 2))
/// }, |u: &Usage| *u).await;
/// # let _ = usage; }
/// ```
pub async fn traced<T, E>(
    span: tracing::Span,
    call: impl std::future::Future<Output = Result<T, E>>,
    usage_of: impl FnOnce(&T) -> Usage,
) -> Result<T, E> {
    use tracing::Instrument as _;
    let result = call.instrument(span.clone()).await;
    if let Ok(reply) = &result {
        if !span.is_disabled() {
            let usage = usage_of(reply);
            span.record("input_tokens", usage.input_tokens);
            span.record("output_tokens", usage.output_tokens);
        }
    }
    result
}

/// A cost as it is shown everywhere: its currency named, to a hundredth of a cent.
///
/// ```
/// assert_eq!(stategraph_llm::usd(0.01234), "USD 0.0123");
/// ```
pub fn usd(cost: f64) -> String {
    format!("USD {cost:.4}")
}

impl fmt::Display for UsageLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn line(f: &mut fmt::Formatter<'_>, name: &str, u: &NodeUsage) -> fmt::Result {
            write!(
                f,
                "{name:<20} {:>5} {:<5} {:>10} in {:>10} out",
                u.calls,
                if u.calls == 1 { "call" } else { "calls" },
                u.usage.input_tokens,
                u.usage.output_tokens
            )?;
            if let Some(cost) = u.cost {
                write!(f, "  cost {}", usd(cost))?;
                if u.unpriced_calls > 0 {
                    let noun = if u.unpriced_calls == 1 {
                        "call"
                    } else {
                        "calls"
                    };
                    write!(f, " (+{} unpriced {noun})", u.unpriced_calls)?;
                }
            }
            if u.replayed_calls > 0 {
                write!(
                    f,
                    "  ({} reused by resume: {} in {} out not paid again)",
                    u.replayed_calls, u.replayed.input_tokens, u.replayed.output_tokens
                )?;
            }
            writeln!(f)
        }
        for (name, usage) in &self.nodes {
            line(f, name, usage)?;
        }
        line(f, "total", &self.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_round_trips_through_json() {
        let mut ledger = UsageLedger::new();
        ledger.record(
            "a",
            Usage::new(10, 2),
            Some(&Pricing {
                input_per_million: 1.0,
                output_per_million: 1.0,
            }),
        );
        let json = serde_json::to_string(&ledger).unwrap();
        let back: UsageLedger = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ledger);
        let text = ledger.to_string();
        assert!(text.contains("total"));
        // The currency is named: prices are US dollars.
        assert!(text.contains("cost USD 0.0000"), "{text}");
        assert!(!text.contains('$'), "{text}");
    }

    #[test]
    fn one_call_is_one_call() {
        let mut ledger = UsageLedger::new();
        ledger.record("plan", Usage::new(10, 5), None);
        ledger.record("answer", Usage::new(10, 5), None);
        ledger.record("answer", Usage::new(10, 5), None);
        let text = ledger.to_string();
        assert!(text.contains("    1 call "), "{text}");
        assert!(text.contains("    2 calls"), "{text}");
        assert!(!text.contains("1 calls"), "{text}");
    }

    #[test]
    fn every_request_is_a_call_and_the_ledger_format_is_unchanged() {
        let price = Pricing {
            input_per_million: 1.0,
            output_per_million: 1.0,
        };
        let mut ledger = UsageLedger::new();
        // A structured reply asked for three times, and a plain call.
        let three = Usage::new(10, 1) + Usage::new(12, 1) + Usage::new(14, 1);
        ledger.record("split", three, None);
        ledger.record("answer", Usage::new(5, 5), Some(&price));
        ledger.record_reused("answer", Usage::new(5, 5) + Usage::new(5, 5), Some(&price));
        let total = ledger.total();
        assert_eq!(total.calls, 6);
        assert_eq!(total.unpriced_calls, 3);
        assert_eq!(total.replayed_calls, 2);
        assert_eq!(total.usage, Usage::new(51, 18).tokens());
        // Requests are counted in `calls`, not repeated inside `usage`: old readers still decode.
        let json = serde_json::to_value(&ledger).unwrap();
        assert!(!json.to_string().contains("requests"), "{json}");
        let back: UsageLedger = serde_json::from_value(json).unwrap();
        assert_eq!(back, ledger);
    }

    #[test]
    fn usage_saved_before_requests_were_counted_is_one_call() {
        // A journaled reply and a ledger as an older version wrote them.
        let old: Usage =
            serde_json::from_str(r#"{"input_tokens": 7, "output_tokens": 3}"#).unwrap();
        assert_eq!(old.requests, 0);
        let ledger: UsageLedger = serde_json::from_str(
            r#"{"nodes": {"plan": {"calls": 2, "usage": {"input_tokens": 9, "output_tokens": 4}, "unpriced_calls": 2}}}"#,
        )
        .unwrap();
        let mut ledger = ledger;
        ledger.record_reused("plan", old, None);
        let plan = ledger.node("plan").unwrap();
        assert_eq!((plan.calls, plan.replayed_calls), (3, 1));
        assert_eq!(plan.usage, Usage::new(16, 7).tokens());
    }

    #[test]
    fn merge_is_addition() {
        let mut a = UsageLedger::new();
        a.record("x", Usage::new(1, 1), None);
        let mut b = UsageLedger::new();
        b.record("x", Usage::new(2, 3), None);
        b.record("y", Usage::new(5, 0), None);
        let ab = a.clone().merged(&b);
        let ba = b.merged(&a);
        assert_eq!(ab, ba);
        assert_eq!(ab.node("x").map(|n| n.calls), Some(2));
        assert_eq!(ab.total().usage, Usage::new(8, 4).tokens());
        assert_eq!(ab.total().cost, None);
    }
}
