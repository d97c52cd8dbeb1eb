//! What a thread paid for model calls, as `graph state` tells it: the usage ledger its state
//! keeps in `usage` (the built-in agents' convention), and what no step's ledger holds (failed
//! attempts, results an edit or a rerun set aside, a fork's source's), found by
//! stategraph-spend on the thread's branch. A thread whose state keeps no ledger paid nothing
//! the server can know of: its cost is `null`.

use serde_json::{json, Value};
use stategraph::checkpoint::{CheckpointId, Checkpointer};
use stategraph_llm::{NodeUsage, UsageLedger};

/// The ledger `values` keeps in `usage`, when it keeps one.
pub(crate) fn ledger_of(values: &Value) -> Option<UsageLedger> {
    serde_json::from_value(values.get("usage")?.clone()).ok()
}

/// One total as the API shows it: `usd` is `null` when no call had a price.
pub(crate) fn total_json(total: &NodeUsage) -> Value {
    json!({
        "usd": total.cost,
        "calls": total.calls,
        "input_tokens": total.usage.input_tokens,
        "output_tokens": total.usage.output_tokens,
        "unpriced_calls": total.unpriced_calls,
    })
}

/// A thread's cost for a listing: its state's ledger only (the walk of its history that finds
/// what no ledger holds is for one thread's readout, [`readout`]).
pub(crate) fn listed(values: &Value) -> Option<Value> {
    ledger_of(values).map(|l| total_json(&l.total()))
}

/// A thread's cost in full at `checkpoint`: the state's ledger by node, what no ledger holds
/// (priced with the graph file's `[settings.pricing]`), and the sum. `None` when the state keeps
/// no ledger. A store that cannot say what is off the ledger leaves it out, as `graph state`
/// does, and says so in `off_ledger_error`.
pub(crate) async fn readout(
    store: &dyn Checkpointer,
    thread: &str,
    checkpoint: CheckpointId,
    values: &Value,
    settings: &serde_json::Map<String, Value>,
) -> Option<Value> {
    let ledger = ledger_of(values)?;
    let pricing = stategraph_spend::pricing_of(settings);
    let off = stategraph_spend::off_ledger(store, thread, Some(checkpoint), pricing.as_ref()).await;
    let (off, off_error) = match off {
        Ok(off) => (off, None),
        Err(e) => (UsageLedger::new(), Some(e.to_string())),
    };
    let all = ledger.clone().merged(&off);
    let nodes: serde_json::Map<String, Value> = all
        .nodes
        .iter()
        .map(|(node, usage)| (node.clone(), total_json(usage)))
        .collect();
    let mut out = total_json(&all.total());
    if let Value::Object(map) = &mut out {
        map.insert("nodes".into(), Value::Object(nodes));
        map.insert("ledger".into(), total_json(&ledger.total()));
        let off_json = (!off.is_empty()).then(|| total_json(&off.total()));
        map.insert("off_ledger".into(), json!(off_json));
        if let Some(e) = off_error {
            map.insert("off_ledger_error".into(), json!(e));
        }
    }
    Some(out)
}
