//! `#[derive(State)]` and `#[derive(Keyed)]` as a user writes them: the generated update type,
//! its builders and JSON form, and how a superstep's writes merge.

use serde::{Deserialize, Serialize};
use stategraph::state::{MergeError, Reducer, TaggedUpdate, Update, Write};
use stategraph::{Command, Keyed, State};

#[derive(Keyed, Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[key]
    id: u32,
    text: String,
}

fn doc(id: u32, text: &str) -> Doc {
    Doc {
        id,
        text: text.into(),
    }
}

/// Keeps the larger value: a custom reducer type.
struct Max;

impl Reducer<u32> for Max {
    fn reduce(current: &mut u32, incoming: u32) {
        *current = (*current).max(incoming);
    }
}

/// Joins with a separator: a one-off reducer function.
fn join_lines(current: &mut String, incoming: String) {
    if !current.is_empty() {
        current.push('\n');
    }
    current.push_str(&incoming);
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Research {
    topic: String,
    #[state(overwrite)]
    status: String,
    #[state(append)]
    messages: Vec<String>,
    #[state(add)]
    tokens: u64,
    #[state(merge_by_id)]
    docs: Vec<Doc>,
    #[state(reducer = Max)]
    best_score: u32,
    #[state(with = join_lines)]
    notes: String,
}

/// Applies one superstep: `(node, update)` pairs in task order.
fn step<S: State>(state: &mut S, writes: Vec<(&str, S::Update)>) -> Result<(), MergeError> {
    let mut batch: Vec<_> = writes
        .into_iter()
        .map(|(node, update)| TaggedUpdate::new(node, update))
        .collect();
    state.apply(&mut batch)
}

#[test]
fn a_field_without_attribute_is_overwritten() {
    let mut s = Research {
        topic: "old".into(),
        ..Default::default()
    };
    step(
        &mut s,
        vec![("plan", ResearchUpdate::default().topic("rust"))],
    )
    .unwrap();
    assert_eq!(s.topic, "rust");

    // A field no node writes keeps its value.
    step(&mut s, vec![("plan", ResearchUpdate::default().tokens(1))]).unwrap();
    assert_eq!(s.topic, "rust");
}

#[test]
fn append_add_and_merge_by_id_fold_a_step_in_task_order() {
    let mut s = Research {
        messages: vec!["hi".into()],
        tokens: 10,
        docs: vec![doc(1, "a"), doc(2, "b")],
        ..Default::default()
    };
    step(
        &mut s,
        vec![
            (
                "search",
                ResearchUpdate::default()
                    .messages(vec!["found 2".to_string()])
                    .tokens(5)
                    .docs(vec![doc(2, "B"), doc(3, "c")]),
            ),
            (
                "summarise",
                ResearchUpdate::default()
                    .messages(vec!["summary".to_string()])
                    .tokens(7)
                    .docs(vec![doc(1, "A")]),
            ),
        ],
    )
    .unwrap();
    assert_eq!(s.messages, ["hi", "found 2", "summary"]);
    assert_eq!(s.tokens, 22);
    assert_eq!(s.docs, [doc(1, "A"), doc(2, "B"), doc(3, "c")]);
}

#[test]
fn keyed_derive_exposes_the_key_field() {
    assert_eq!(*stategraph::state::Keyed::key(&doc(7, "x")), 7);
}

#[test]
fn custom_reducer_type_and_function_fold_several_writers() {
    let mut s = Research {
        best_score: 4,
        notes: "start".into(),
        ..Default::default()
    };
    step(
        &mut s,
        vec![
            ("a", ResearchUpdate::default().best_score(9).notes("one")),
            ("b", ResearchUpdate::default().best_score(6).notes("two")),
        ],
    )
    .unwrap();
    assert_eq!(s.best_score, 9);
    assert_eq!(s.notes, "start\none\ntwo");
}

#[test]
fn an_explicit_overwrite_bypasses_the_reducer() {
    let mut s = Research {
        messages: vec!["old".into(), "history".into()],
        ..Default::default()
    };
    step(
        &mut s,
        vec![
            (
                "a",
                ResearchUpdate::default().messages(vec!["dropped".to_string()]),
            ),
            (
                "trim",
                ResearchUpdate::default().overwrite_messages(vec!["fresh".to_string()]),
            ),
        ],
    )
    .unwrap();
    assert_eq!(s.messages, ["fresh"]);
}

#[test]
fn two_writers_of_an_overwrite_field_in_one_step_is_an_error() {
    let mut s = Research::default();
    let err = step(
        &mut s,
        vec![
            ("left", ResearchUpdate::default().status("done")),
            ("right", ResearchUpdate::default().status("failed")),
        ],
    )
    .unwrap_err();
    assert_eq!(
        err,
        MergeError::ConcurrentWrites {
            field: "status",
            nodes: vec!["left".into(), "right".into()],
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("`status`") && message.contains("left, right"),
        "{message}"
    );
}

#[test]
fn written_fields_lists_the_writes_in_declaration_order() {
    let update = ResearchUpdate::default()
        .notes("n")
        .overwrite_messages(vec![])
        .topic("t");
    assert_eq!(update.written_fields(), ["topic", "messages", "notes"]);
    // The trait method agrees with the inherent one.
    assert_eq!(
        Update::written_fields(&update),
        ["topic", "messages", "notes"]
    );
    assert!(ResearchUpdate::default().is_empty());
}

#[test]
fn builders_take_anything_that_converts_into_the_field() {
    let update = ResearchUpdate::default()
        .topic("str slice")
        .status(String::from("owned"));
    assert_eq!(update.topic, Some(Write::Reduce("str slice".to_string())));
    assert_eq!(update.status, Some(Write::Reduce("owned".to_string())));
}

#[test]
fn update_json_is_bare_values_with_marked_overwrites() {
    let update = ResearchUpdate::default()
        .tokens(3)
        .overwrite_messages(vec!["only".to_string()]);
    let json = serde_json::to_value(&update).unwrap();
    // Unwritten fields are left out.
    assert_eq!(
        json,
        serde_json::json!({"messages": {"$overwrite": ["only"]}, "tokens": 3})
    );

    let back: ResearchUpdate = serde_json::from_value(json).unwrap();
    assert_eq!(back.tokens, Some(Write::Reduce(3)));
    assert_eq!(
        back.messages,
        Some(Write::Overwrite(vec!["only".to_string()]))
    );
    assert_eq!(back.written_fields(), ["messages", "tokens"]);
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Task {
    current: Option<String>,
    title: String,
}

#[test]
fn a_write_of_none_reads_back_as_a_write() {
    // As a checkpoint stores a step's update and a later read replays it: a node that clears
    // an `Option` field must clear it in the state read back, too.
    let mut state = Task {
        current: Some("a.md".into()),
        title: "t".into(),
    };
    let cleared = TaskUpdate::default().current(None);
    let json = serde_json::to_value(&cleared).unwrap();
    assert_eq!(json, serde_json::json!({"current": null}));
    let back: TaskUpdate = serde_json::from_value(json).unwrap();
    assert_eq!(back.current, Some(Write::Reduce(None)));
    step(&mut state, vec![("finish", back)]).unwrap();
    assert_eq!(state.current, None);
    // A null where the field cannot hold one stays no write, and an absent field is none.
    let back: TaskUpdate = serde_json::from_str(r#"{"title": null}"#).unwrap();
    assert_eq!(back.written_fields(), Vec::<&str>::new());
    let back: TaskUpdate = serde_json::from_str(r#"{"current": {"$overwrite": null}}"#).unwrap();
    assert_eq!(back.current, Some(Write::Overwrite(None)));
}

#[test]
fn update_json_rejects_unknown_fields_by_name() {
    let err = serde_json::from_str::<ResearchUpdate>(r#"{"tokens": 1, "tokenz": 2}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `tokenz`"), "{err}");
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Renamed {
    #[state(append)]
    chat_log: Vec<String>,
    #[serde(rename = "who")]
    user_name: String,
    #[serde(alias = "n")]
    count: u32,
}

#[test]
fn update_json_uses_the_states_serde_names() {
    let update = RenamedUpdate::default()
        .chat_log(vec!["hi".to_string()])
        .user_name("ada");
    let json = serde_json::to_value(&update).unwrap();
    assert_eq!(json, serde_json::json!({"chatLog": ["hi"], "who": "ada"}));

    // So the state's JSON and a hand-written update's JSON agree on every name.
    let state = serde_json::to_value(Renamed::default()).unwrap();
    for key in json.as_object().unwrap().keys() {
        assert!(
            state.get(key).is_some(),
            "update key {key} is not a state key"
        );
    }

    let aliased: RenamedUpdate = serde_json::from_str(r#"{"n": 4}"#).unwrap();
    assert_eq!(aliased.count, Some(Write::Reduce(4)));
    assert!(serde_json::from_str::<RenamedUpdate>(r#"{"chat_log": []}"#).is_err());
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Unversioned {
    x: u8,
}

/// v1 stored `name`; v2 calls it `title`.
fn upgrade(version: u32, mut value: serde_json::Value) -> Result<serde_json::Value, String> {
    match version {
        1 => {
            let name = value
                .as_object_mut()
                .and_then(|o| o.remove("name"))
                .ok_or("v1 state without `name`")?;
            value["title"] = name;
            Ok(value)
        }
        other => Err(format!("unknown version {other}")),
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[state(version = 2, migrate = upgrade)]
struct Versioned {
    title: String,
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[state(version = 3)]
struct VersionOnly {
    x: u8,
}

#[test]
fn version_and_migrate_come_from_the_struct_attribute() {
    assert_eq!(Unversioned::VERSION, 1);
    assert_eq!(Versioned::VERSION, 2);
    assert_eq!(VersionOnly::VERSION, 3);

    let migrated = Versioned::migrate(1, serde_json::json!({"name": "old"})).unwrap();
    assert_eq!(migrated, serde_json::json!({"title": "old"}));
    assert_eq!(
        Versioned::migrate(0, serde_json::json!({})).unwrap_err(),
        "unknown version 0"
    );

    // Without `migrate`, an old version is refused.
    assert!(VersionOnly::migrate(1, serde_json::json!({"x": 1})).is_err());
}

#[test]
fn an_update_converts_into_a_command() {
    let command: Command<Research> = ResearchUpdate::default().tokens(2).into();
    assert_eq!(command.update.tokens, Some(Write::Reduce(2)));
    assert!(command.goto.is_empty());

    // So a node can return `update.into()` and still add destinations.
    let routed = Command::from(ResearchUpdate::default()).goto("review");
    assert_eq!(routed.goto.len(), 1);
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Token {
    r#type: String,
    #[state(append)]
    r#match: Vec<u8>,
}

#[test]
fn raw_identifier_fields_get_plain_names() {
    let update = TokenUpdate::default().r#type("word").r#match(vec![1]);
    assert_eq!(update.written_fields(), ["type", "match"]);
    assert_eq!(
        serde_json::to_value(&update).unwrap(),
        serde_json::json!({"type": "word", "match": [1]})
    );

    let mut s = Token::default();
    step(
        &mut s,
        vec![
            ("a", update),
            ("b", TokenUpdate::default().overwrite_type("number")),
        ],
    )
    .unwrap();
    assert_eq!(s.r#type, "number");
    assert_eq!(s.r#match, [1]);

    let err = step(
        &mut s,
        vec![
            ("a", TokenUpdate::default().r#type("x")),
            ("b", TokenUpdate::default().r#type("y")),
        ],
    )
    .unwrap_err();
    assert!(matches!(
        err,
        MergeError::ConcurrentWrites { field: "type", .. }
    ));
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Empty {}

#[test]
fn a_state_without_fields_applies_nothing() {
    let mut s = Empty::default();
    step(&mut s, vec![("a", EmptyUpdate::default())]).unwrap();
    assert!(EmptyUpdate::default().written_fields().is_empty());
}

mod visibility {
    use serde::{Deserialize, Serialize};

    #[derive(stategraph::State, Clone, Default, Serialize, Deserialize)]
    pub struct Public {
        pub n: u32,
    }
}

#[test]
fn the_update_has_the_states_visibility() {
    let update = visibility::PublicUpdate::default().n(1);
    assert!(update.n.is_some());
}

/// A state struct written by a `macro_rules!` macro, whose field names carry the macro's
/// hygiene.
macro_rules! counter_state {
    ($name:ident, $field:ident) => {
        #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
        #[state(version = 2, migrate = upgrade)]
        struct $name {
            #[state(add)]
            $field: u32,
        }
    };
}

counter_state!(Counter, hits);

#[test]
fn a_state_declared_by_a_macro_rules_macro_derives_too() {
    let mut s = Counter::default();
    step(
        &mut s,
        vec![
            ("a", CounterUpdate::default().hits(2)),
            ("b", CounterUpdate::default().hits(3)),
        ],
    )
    .unwrap();
    assert_eq!(s.hits, 5);
    assert_eq!(Counter::VERSION, 2);
}
