//! The plan as people edit it: Markdown render/parse round trip, every kind of invalid edit
//! refused with its line named, and one-todo edits as `graph plan add|rm|move|status` apply them.

use proptest::prelude::*;
use stategraph_agents::research::{
    apply_edit, apply_markdown, parse, render, validate_plan, Kind, MoveTo, PlanEdit, Status, Todo,
};

fn plan() -> Vec<Todo> {
    vec![
        Todo::new("t1", "Find the sled release date", Kind::Research),
        Todo::new("t2", "Read https://sled.rs/ (the home page)", Kind::Tool).depends_on(["t1"]),
        Todo::new("t3", "Compare with RocksDB", Kind::Research).depends_on(["t1", "t2"]),
    ]
}

/// Parses `markdown` and returns the refusal's line and message.
fn refused(markdown: &str) -> (Option<usize>, String) {
    let err = parse(markdown).unwrap_err();
    (err.line, err.to_string())
}

#[test]
fn render_shows_status_ids_kinds_and_dependencies() {
    let mut p = plan();
    p[0].status = Status::Done;
    p[0].result = Some("2020 [1]".into());
    p[2].status = Status::Blocked;
    p[2].failure_reason = Some("blocked: dependency `t2` is failed".into());
    let md = render(&p);
    assert!(
        md.contains("- [x] t1 (research): Find the sled release date\n    result: 2020 [1]\n"),
        "{md}"
    );
    assert!(
        md.contains("- [ ] t2 (tool): Read https://sled.rs/ (the home page) (after: t1)\n"),
        "{md}"
    );
    assert!(
        md.contains(
            "- [-] t3 (research): Compare with RocksDB (after: t1, t2)\n    reason: blocked"
        ),
        "{md}"
    );
    // Details are indented, so the parse gets exactly the editable fields back.
    let back = parse(&md).unwrap();
    assert_eq!(
        back.iter().map(|t| (&t.id, t.status)).collect::<Vec<_>>(),
        [
            (&"t1".to_string(), Status::Done),
            (&"t2".to_string(), Status::Pending),
            (&"t3".to_string(), Status::Blocked)
        ]
    );
    assert_eq!(back[1].task, "Read https://sled.rs/ (the home page)");
}

#[test]
fn every_kind_of_invalid_edit_is_refused_with_its_line() {
    let md = render(&plan());
    // Lines 1-4 are the heading, the legend and a blank line; t1..t3 are lines 5..7.
    let cases = [
        (
            md.replace("after: t1, t2", "after: t1, t9"),
            7,
            "unknown dependency `t9`",
        ),
        (md.replace("- [ ] t3", "- [ ] t2"), 7, "duplicate id `t2`"),
        (
            md.replace(
                "Find the sled release date",
                "Find the sled release date (after: t3)",
            ),
            5,
            "cycle among t1, t2, t3",
        ),
        (
            md.replace("Compare with RocksDB", "Compare with RocksDB (after: t3)")
                .replace(" (after: t1, t2)", ""),
            7,
            "depends on itself",
        ),
        (
            md.replace("- [ ] t2 (tool): ", "- [ ] t2 (tool) "),
            6,
            "cannot read the kind",
        ),
        (
            md.replace("- [ ] t2", "- [?] t2"),
            6,
            "unknown status mark `[?]`",
        ),
        (md.replace("(tool)", "(tol)"), 6, "unknown kind `tol`"),
        (
            md.replace(
                "- [ ] t2 (tool): Read https://sled.rs/ (the home page)",
                "- [ ] t2 (tool):   ",
            ),
            6,
            "has no task",
        ),
        (md.replace("- [ ] t2", "- [ ] t 2"), 6, "invalid id `t 2`"),
        (
            format!("{md}Remember to check the dates\n"),
            8,
            "cannot read this line",
        ),
    ];
    for (text, line, needle) in cases {
        let (at, message) = refused(&text);
        assert_eq!(at, Some(line), "{needle}: {message}\n{text}");
        assert!(
            message.contains(needle),
            "expected `{needle}` in: {message}"
        );
        assert!(message.starts_with(&format!("line {line}: ")), "{message}");
    }
}

#[test]
fn notes_quotes_headings_and_indented_lines_are_ignored() {
    let md = "# My plan\n> a note\n\n- [ ] a: one\n    some detail\n* [x] b (tool): two https://x.y/ (after: a)\n";
    let p = parse(md).unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].kind, Kind::Research, "the kind defaults to research");
    assert_eq!((p[1].kind, p[1].status), (Kind::Tool, Status::Done));
}

#[test]
fn an_edited_markdown_plan_keeps_what_it_does_not_show() {
    let mut stored = plan();
    stored[0].status = Status::Done;
    stored[0].result = Some("2020 [1]".into());
    stored[0].source_ids = vec![1];
    stored[1].status = Status::Failed;
    stored[1].attempts = 2;
    stored[1].failure_reason = Some("page unreachable".into());
    // Drop t3, put t2 back to pending.
    let md = render(&stored)
        .lines()
        .filter(|l| !l.contains("RocksDB"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("- [!] t2", "- [ ] t2");
    let edited = apply_markdown(&stored, &md).unwrap();
    assert_eq!(edited.len(), 2);
    assert_eq!(edited[0].result.as_deref(), Some("2020 [1]"));
    assert_eq!(edited[0].source_ids, [1]);
    assert_eq!(
        (
            edited[1].status,
            edited[1].attempts,
            edited[1].failure_reason.clone()
        ),
        (Status::Pending, 0, None),
        "back to pending starts afresh"
    );
}

#[test]
fn one_todo_edits_apply_or_are_refused_with_the_line() {
    let p = plan();
    let added = apply_edit(
        &p,
        PlanEdit::Add {
            id: None,
            task: "Summarise\nbenchmarks".into(),
            kind: Kind::Research,
            dependencies: vec!["t3".into()],
        },
    )
    .unwrap();
    assert_eq!(added[3].id, "t4");
    assert_eq!(added[3].task, "Summarise benchmarks");

    let err = apply_edit(
        &p,
        PlanEdit::Add {
            id: Some("t2".into()),
            task: "again".into(),
            kind: Kind::Research,
            dependencies: vec![],
        },
    )
    .unwrap_err();
    assert_eq!(err.line, Some(8));
    assert!(err.message.contains("duplicate id `t2`"));

    let err = apply_edit(&p, PlanEdit::Remove { id: "t1".into() }).unwrap_err();
    assert!(err.message.contains("`t2` depends on it"), "{err}");
    assert_eq!(err.line, Some(5));
    let err = apply_edit(&p, PlanEdit::Remove { id: "nope".into() }).unwrap_err();
    assert_eq!(err.line, None);
    assert!(err.message.contains("no todo `nope`"));

    let moved = apply_edit(
        &p,
        PlanEdit::Move {
            id: "t3".into(),
            to: MoveTo::Position(1),
        },
    )
    .unwrap();
    assert_eq!(
        moved.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["t3", "t1", "t2"]
    );
    let moved = apply_edit(
        &p,
        PlanEdit::Move {
            id: "t1".into(),
            to: MoveTo::After("t2".into()),
        },
    )
    .unwrap();
    assert_eq!(
        moved.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["t2", "t1", "t3"]
    );

    let err = apply_edit(
        &p,
        PlanEdit::Dependencies {
            id: "t1".into(),
            dependencies: vec!["t3".into()],
        },
    )
    .unwrap_err();
    assert!(err.message.contains("cycle"), "{err}");
    assert_eq!(err.line, Some(5));

    let blocked = apply_edit(
        &p,
        PlanEdit::Status {
            id: "t2".into(),
            status: Status::Blocked,
            reason: Some("paywalled".into()),
        },
    )
    .unwrap();
    assert_eq!(blocked[1].failure_reason.as_deref(), Some("paywalled"));
    // Refused edits leave the input alone (it is borrowed), so the stored plan never changes.
    assert_eq!(p, plan());
}

fn todo_strategy() -> impl Strategy<Value = (String, Kind, Status, Vec<usize>)> {
    (
        "[A-Za-z][A-Za-z0-9 ,.'?-]{0,30}[A-Za-z0-9?.]",
        prop_oneof![Just(Kind::Research), Just(Kind::Tool)],
        prop_oneof![
            Just(Status::Pending),
            Just(Status::InProgress),
            Just(Status::Done),
            Just(Status::Blocked),
            Just(Status::Failed)
        ],
        prop::collection::vec(0usize..8, 0..3),
    )
}

proptest! {
    /// Any valid plan renders to Markdown that parses back to the same todos.
    #[test]
    fn render_then_parse_is_the_identity(raw in prop::collection::vec(todo_strategy(), 0..8)) {
        let n = raw.len();
        let plan: Vec<Todo> = raw
            .into_iter()
            .enumerate()
            .map(|(i, (task, kind, status, deps))| {
                // Dependencies only on earlier todos: no cycles.
                let mut deps: Vec<String> = deps.into_iter().filter(|&d| d < i).map(|d| format!("t{}", d + 1)).collect();
                deps.dedup();
                let task = task.split_whitespace().collect::<Vec<_>>().join(" ");
                let mut todo = Todo::new(format!("t{}", i + 1), task, kind).depends_on(deps).with_status(status);
                if i > 0 && i % 3 == 0 { todo.parent = Some("t1".into()); }
                todo
            })
            .collect();
        prop_assert!(validate_plan(&plan).is_ok());
        let back = parse(&render(&plan)).unwrap();
        prop_assert_eq!(back.len(), n);
        prop_assert_eq!(back, plan);
    }
}
