//! The agents at library level, one test binary (each file a module): the tool loop, the
//! research agent's run, plan, escalation, journal and memory, the memo pipeline's artifacts,
//! the spend readouts and the task tree. `research_config.rs` stays a binary of its own: it
//! changes the process environment.

#[path = "../../../../tests/support/research_agent.rs"]
mod support;
#[path = "../../../../tests/support/task_plans.rs"]
mod task_plans;

mod agent_loop;
mod memo_artifacts;
mod research_escalation;
mod research_journal;
mod research_memory;
mod research_plan;
mod research_run;
mod spend_kept;
mod spend_nested;
mod tree_run;
