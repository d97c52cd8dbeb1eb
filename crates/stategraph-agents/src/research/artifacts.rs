//! The research plan as a file people edit: `plan.md`, the Markdown checklist `graph plan`
//! prints and `graph plan --edit` reads ([`render`] and [`apply_markdown`], the one format).
//!
//! The plan a run follows is the one approved at review, so the file is attributed to
//! `planning_mode`: an edit picked up on `graph resume` counts as the reviewed plan (approved,
//! as a person edited it), and the run goes on from `execution_router` with it. Results,
//! sources and attempts of the todos that stay are kept from the checkpoint; a removed todo is
//! really removed (the plan is overwritten, not merged).

use super::plan_markdown::{apply_markdown, render};
use super::state::{PlanState, PlanStateUpdate};
use stategraph_artifacts::{Artifact, ArtifactSet, EditError};

/// The file the plan is written to, in the run folder.
pub const PLAN_FILE: &str = "plan.md";

/// The research agent's artifacts: `plan.md` (editable, by `planning_mode`).
///
/// ```
/// use stategraph_agents::research::{artifacts, Kind, Todo};
/// let set = artifacts();
/// let plan = &set.artifacts()[0];
/// assert_eq!((plan.path(), plan.node(), plan.is_editable()), ("plan.md", "planning_mode", true));
/// ```
pub fn artifacts() -> ArtifactSet<PlanState> {
    let plan = Artifact::markdown("plan", PLAN_FILE, "planning_mode", |s: &PlanState| {
        // No plan yet, no file (an empty checklist would read as "remove every todo").
        match s.plan.is_empty() {
            true => String::new(),
            false => render(&s.plan),
        }
    })
    .parse_text(|s: &PlanState, text: &str| {
        let plan = apply_markdown(&s.plan, text).map_err(|e| {
            let err = EditError::new(e.message);
            match e.line {
                Some(line) => err.at_line(line),
                None => err,
            }
        })?;
        let count = plan.len();
        Ok(PlanStateUpdate::default()
            .overwrite_plan(plan)
            .plan_approved(true)
            .log(vec![format!(
                "plan edited in {PLAN_FILE} and approved ({count} todos)"
            )]))
    });
    ArtifactSet::new().with(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::{Kind, Status, Todo};
    use stategraph_artifacts::Entry;

    fn state() -> PlanState {
        let mut done = Todo::new("t1", "find X", Kind::Research).with_status(Status::Done);
        done.result = Some("X is 4 [1]".into());
        PlanState {
            plan: vec![
                done,
                Todo::new("t2", "find Y", Kind::Research).depends_on(["t1"]),
            ],
            ..PlanState::default()
        }
    }

    fn parse(s: &PlanState, text: &str) -> Result<PlanStateUpdate, EditError> {
        let set = artifacts();
        set.artifacts()[0]
            .read_edit(s, vec![Entry::new("", text.as_bytes().to_vec())])
            .expect("editable")
    }

    #[test]
    fn the_file_is_what_graph_plan_prints_and_reads_back() {
        let s = state();
        let set = artifacts();
        let a = &set.artifacts()[0];
        let files = a.render(&s).unwrap();
        assert_eq!(
            files,
            vec![(PLAN_FILE.to_string(), render(&s.plan).into_bytes())]
        );
        assert!(a.render(&PlanState::default()).unwrap().is_empty());

        let edited = render(&s.plan).replace("find Y", "find Y and Z");
        let update = serde_json::to_value(parse(&s, &edited).unwrap()).unwrap();
        let plan = &update["plan"]["$overwrite"];
        assert_eq!(plan[1]["task"], "find Y and Z");
        assert_eq!(plan[0]["result"], "X is 4 [1]", "results are kept");
        assert_eq!(update["plan_approved"], true);
    }

    #[test]
    fn a_bad_line_or_an_empty_plan_is_refused() {
        let s = state();
        let bad = render(&s.plan).replace("(after: t1)", "(after: t9)");
        let e = parse(&s, &bad).unwrap_err();
        assert!(e.message.contains("unknown dependency `t9`"), "{e}");
        assert_eq!(e.line, Some(7));
        let e = parse(&s, "# Plan\n").unwrap_err();
        assert!(e.message.contains("no todo left"), "{e}");
    }
}
