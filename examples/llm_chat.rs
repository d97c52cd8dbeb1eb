//! Ask the configured model one question and stream the answer.
//!
//! ```text
//! ANTHROPIC_API_KEY=... cargo run --example llm_chat -- "Why is the sky blue?"
//! OPENAI_BASE_URL=http://localhost:11434/v1 GRAPH_MODEL=llama3.2 cargo run --example llm_chat
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use stategraph_llm::provider::{from_env, ProviderSettings};
use stategraph_llm::{ChatRequest, Message, Pricing, TokenSink, UsageLedger};

#[tokio::main]
async fn main() -> ExitCode {
    let question = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "In one sentence: why is the sky blue?".to_string());
    let model = match from_env(ProviderSettings::default()) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let print: TokenSink = Arc::new(|delta: &str| {
        print!("{delta}");
        let _ = std::io::stdout().flush();
    });
    let request = ChatRequest::new(vec![
        Message::system("You are concise."),
        Message::user(question),
    ])
    .with_stream(print);
    match model.chat(request).await {
        Ok(reply) => {
            println!();
            let mut ledger = UsageLedger::new();
            // Illustrative prices; configure your model's real ones.
            let price = Pricing {
                input_per_million: 3.0,
                output_per_million: 15.0,
            };
            ledger.record("answer", reply.usage, Some(&price));
            eprint!("\n{} via {}\n{ledger}", reply.usage.total(), reply.model);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("\nerror: {e}");
            ExitCode::FAILURE
        }
    }
}
