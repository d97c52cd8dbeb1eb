//! The shared-workload harness (`benches/workloads.rs`) in `--quick` mode: every workload runs
//! and prints the one-line JSON that `../shared/bench/compare.py` reads. Only the line's shape is
//! checked, never speed.

#[path = "../benches/workloads.rs"]
#[allow(dead_code)]
mod workloads;

use workloads::{Options, Report};

fn run(args: &str) -> (Report, serde_json::Map<String, serde_json::Value>) {
    let args: Vec<String> = args.split_whitespace().map(String::from).collect();
    let report = workloads::run(&Options::parse(&args).unwrap()).unwrap();
    let line = report.to_json_line();
    assert!(!line.contains('\n'), "{line}");
    let serde_json::Value::Object(fields) = serde_json::from_str(&line).unwrap() else {
        panic!("not an object: {line}")
    };
    let keys: Vec<&str> = fields.keys().map(String::as_str).collect();
    let mut expected = vec![
        "workload",
        "engine",
        "saver",
        "durability",
        "steps",
        "seconds",
        "steps_per_s",
        "db_bytes",
    ];
    expected.sort();
    let mut keys = keys.clone();
    keys.sort();
    assert_eq!(keys, expected, "{line}");
    assert_eq!(fields["engine"], "stategraph");
    assert!(
        fields["seconds"].as_f64().unwrap() >= 0.0 && fields["steps_per_s"].is_number(),
        "{line}"
    );
    (report, fields)
}

#[test]
fn chain_loop_and_fanout_print_the_shared_line_on_both_savers() {
    for (workload, steps) in [("chain", 500), ("loop", 100), ("fanout", 240)] {
        for saver in ["memory", "sled"] {
            let (report, fields) = run(&format!("{workload} --saver {saver} --quick --bench"));
            assert_eq!(
                (fields["workload"].as_str(), fields["saver"].as_str()),
                (Some(workload), Some(saver))
            );
            assert_eq!(fields["durability"], "sync");
            assert_eq!(report.steps, steps, "{workload} on {saver}");
            match saver {
                "memory" => assert!(fields["db_bytes"].is_null()),
                _ => assert!(fields["db_bytes"].as_u64().unwrap() > 0),
            }
        }
    }
    for durability in ["async", "exit"] {
        let (_, fields) = run(&format!(
            "chain --saver sled --durability {durability} --quick"
        ));
        assert_eq!(fields["durability"], durability);
    }
}

#[test]
fn chain_and_fanout_run_threads_concurrently_on_one_store() {
    for (workload, steps) in [("chain", 500), ("fanout", 240)] {
        let (report, fields) = run(&format!(
            "{workload} --saver sled --durability exit --quick --concurrency 8"
        ));
        assert_eq!(fields["durability"], "exit");
        assert_eq!(report.steps, steps, "{workload}");
        assert!(fields["db_bytes"].as_u64().unwrap() > 0);
    }
    let parse = |args: &str| {
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        Options::parse(&args)
    };
    assert!(
        parse("loop --concurrency 8").is_err(),
        "the loop is one thread"
    );
    assert!(parse("chain --concurrency 0").is_err());
    assert_eq!(parse("fanout").unwrap().concurrency, 1);
}

#[test]
fn resume_reads_the_store_the_loop_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("loop-store");
    run(&format!(
        "loop --saver sled --db {} --steps 50",
        db.display()
    ));
    let (report, fields) = run(&format!(
        "resume --saver sled --db {} --steps 50",
        db.display()
    ));
    assert_eq!((report.workload, report.steps), ("resume", 1));
    assert!(fields["db_bytes"].as_u64().unwrap() > 0);

    // `open` times the open alone, of that store or of a new empty one.
    for store in [db.clone(), dir.path().join("empty")] {
        let (report, fields) = run(&format!("open --saver sled --db {}", store.display()));
        assert_eq!(report.workload, "open");
        assert!(fields["db_bytes"].as_u64().unwrap() > 0);
    }

    let args: Vec<String> = ["resume", "--saver", "memory"].map(String::from).to_vec();
    assert!(
        workloads::run(&Options::parse(&args).unwrap()).is_err(),
        "resume needs a sled store"
    );
    assert!(Options::parse(&["nope".to_string()]).is_err());
}
