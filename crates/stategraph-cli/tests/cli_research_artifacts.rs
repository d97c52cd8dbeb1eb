//! The research agent's plan as a file, through the real `graph` binary against a stand-in
//! model server on 127.0.0.1: `plan.md` in the run folder is what `graph plan` prints; a
//! person edits it while the run waits at plan review, `graph resume` picks the edit up (and
//! says so), and the todos that run are those of the edited plan; a bad edit is refused naming
//! file and line, with nothing changed.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;

use research::{Research, T1, T2, T3};
use std::path::PathBuf;

fn plan_file(r: &Research) -> PathBuf {
    r.db.out().join("research-v1/plan.md")
}

#[test]
fn an_edited_plan_file_is_the_plan_the_run_follows() {
    let r = Research::new();
    let thread = r.run(&[]).expect(3).thread();
    let file = plan_file(&r);
    let written = std::fs::read_to_string(&file).expect("plan.md is written at the pause");
    let shown = r.graph(&["plan", &thread]).expect(0);
    assert_eq!(
        written.trim_end(),
        shown.stdout.trim_end(),
        "the format of `graph plan`"
    );

    // The person drops t3 and rewrites t2.
    let t3_line = format!("- [ ] t3 (research): {T3} (after: t1)\n");
    assert!(written.contains(&t3_line), "{written}");
    let edited = written
        .replace(&t3_line, "")
        .replace(T2, &format!("{T2} and its scheduler"));
    std::fs::write(&file, &edited).unwrap();
    let listed = r.graph(&["artifacts", &thread]).expect(0);
    assert!(listed.stdout.contains("edited"), "{listed}");

    let out = r.graph(&["resume", &thread]).expect(0);
    out.stderr_has(&[
        "picked up edited",
        "plan.md (as node `planning_mode`)",
        "runs again from: execution_router",
    ]);
    assert!(out.stdout.contains("Sources:"), "{out}");
    let t2 = format!("{T2} and its scheduler");
    assert_eq!(r.server.keys("Summary"), [T1, t2.as_str()], "t3 never ran");
    assert_eq!(r.server.keys("PlanUpdate"), ["t1", "t2"]);
    assert_eq!(
        r.server.count("Plan", ""),
        1,
        "the plan was not asked for again"
    );

    // The file follows the run, and is the engine's own again.
    let now = std::fs::read_to_string(&file).unwrap();
    assert!(now.contains(&format!("- [x] t2 (research): {t2}")), "{now}");
    assert!(!now.contains("t3"), "{now}");
    let doc = r.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    assert_eq!(doc["files"][0]["path"], "plan.md");
    assert_eq!(doc["files"][0]["state"]["state"], "unchanged", "{doc}");
}

#[test]
fn a_bad_plan_edit_is_refused_naming_file_and_line_and_nothing_changes() {
    let r = Research::new();
    let thread = r.run(&[]).expect(3).thread();
    let file = plan_file(&r);
    let written = std::fs::read_to_string(&file).unwrap();
    let history = r.history(&thread);

    // Line 7 is t3's: it now waits for a todo that does not exist.
    let bad = written.replace("(after: t1)", "(after: t9)");
    assert!(bad.lines().nth(6).unwrap().contains("t9"), "{bad}");
    std::fs::write(&file, &bad).unwrap();
    let out = r.graph(&["resume", &thread]).expect(2);
    out.stderr_has(&["plan.md:7", "unknown dependency `t9`", "nothing changed"]);
    std::fs::write(&file, "# Plan\n\nt1: just do it\n").unwrap();
    r.graph(&["resume", &thread])
        .expect(2)
        .stderr_has(&["plan.md:3", "cannot read this line"]);
    assert_eq!(r.history(&thread), history, "no checkpoint was written");

    // A valid edit and an answer to the review cannot both be taken: refused before anything.
    std::fs::write(&file, written.replace(" (after: t1)", "")).unwrap();
    r.graph(&["resume", &thread, "--resume", "approve"])
        .expect(2)
        .stderr_has(&[
            "plan.md was edited",
            "--resume has nothing to answer",
            "--ignore-edits",
        ]);
    assert_eq!(r.history(&thread), history, "no checkpoint was written");
    assert_eq!(r.server.calls().len(), 1, "only the plan was paid for");

    // --ignore-edits answers the review with the stored plan.
    r.graph(&["resume", &thread, "--resume", "approve", "--ignore-edits"])
        .expect(0);
    assert_eq!(r.server.keys("Summary"), [T1, T2, T3]);
}
