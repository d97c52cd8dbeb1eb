//! The web page of `graph serve` in a real browser: headless Chromium driven through
//! chromedriver (WebDriver, with fantoccini) starts a research run from the page's form, sees
//! it pause for the plan review, has an invalid plan edit refused with the CLI's message, edits
//! the plan (drops a todo), approves, sees the run finish without the dropped todo, and finds
//! the thread listed on the threads page; the finished thread's page shows what it cost (the
//! graph file sets prices) and its artifact `plan.md`, which opens with the text on disk, and a
//! fork from one of its checkpoints is a new thread the threads page lists. The model is the
//! stand-in OpenAI-compatible server
//! on 127.0.0.1 the CLI's research tests use, the corpus a local folder: no network, no key.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); without them the
//! test fails saying so. A screenshot of the paused thread's page is written to
//! `target/screenshots/serve.png`, and to `docs/screenshots/serve.png` (the README's) when
//! `STATEGRAPH_UPDATE_SCREENSHOTS=1`.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;

use fantoccini::{Client, ClientBuilder, Locator};
use harness::{Project, Running};
use research::{Research, QUESTION, T2};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long the page may take to show what a step waits for.
const PATIENCE: Duration = Duration::from_secs(60);

/// chromedriver on a free port of 127.0.0.1, in a process group of its own, which is killed
/// when dropped: the driver and the browsers it started, even when the test failed before it
/// closed its session.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: this test drives Debian's Chromium through chromedriver; \
                 install them with .ci/run (or apt-get install {package})"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        use std::os::unix::process::CommandExt;
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER} ({e}); .ci/run installs it"));
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen on port {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        driver
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test made (its id is the driver's pid).
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A headless Chromium session with a profile of its own (removed with `profile`).
async fn browser(driver: &Driver, profile: &Path) -> Client {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1050",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("no Chromium session through chromedriver: {e}"))
}

/// `graph serve` in `dir` (whose `graphs/research.toml` searches the corpus), pointed at the
/// stand-in model; its address.
fn serve(research: &Research, dir: &Path) -> (Running, String) {
    let mut server = research
        .graph(&["serve", "--addr", "127.0.0.1:0"])
        .current_dir(dir)
        .spawn();
    server.wait_for("serving");
    let addr = server
        .stderr()
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the address it serves on")
        .to_string();
    (server, format!("http://{addr}"))
}

/// Waits until the element `css` shows text containing `needle`; answers that text.
async fn until_text(page: &Client, css: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let shown = match page.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if shown.contains(needle) {
            return shown;
        }
        if start.elapsed() > PATIENCE {
            let html = page.source().await.unwrap_or_default();
            panic!("`{css}` never showed {needle:?}; it shows {shown:?}\n--- page\n{html}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The button whose text is `text`.
fn button(text: &str) -> String {
    format!("//button[normalize-space()='{text}']")
}

async fn click(page: &Client, text: &str) {
    page.find(Locator::XPath(&button(text)))
        .await
        .unwrap_or_else(|e| panic!("no button {text:?}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("cannot click {text:?}: {e}"));
}

/// Replaces what the textarea `css` holds with `text`, typed.
async fn type_into(page: &Client, css: &str, text: &str) {
    let field = page.find(Locator::Css(css)).await.expect(css);
    field.clear().await.expect("clear");
    field.send_keys(text).await.expect("type");
}

async fn screenshot(page: &Client) {
    let png = page.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut places = vec![root.join("target/screenshots/serve.png")];
    if std::env::var_os("STATEGRAPH_UPDATE_SCREENSHOTS").is_some() {
        places.push(root.join("docs/screenshots/serve.png"));
    }
    for place in places {
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        std::fs::write(&place, &png).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_research_run_is_started_paused_edited_answered_and_finished_in_the_page() {
    let driver = Driver::start();
    let research = Research::new();
    let project = Project::new();
    let corpus = research.docs.path().display().to_string();
    project.graph_file("research", |text| {
        text.replace("# corpus = \"docs/\"", &format!("corpus = {corpus:?}"))
            .replace("# [settings.pricing]", "[settings.pricing]")
            .replace("# input_per_million", "input_per_million")
            .replace("# output_per_million", "output_per_million")
    });
    // Graph files of the folder are assistants too, by path; one that cannot be used is not.
    let graphs = project.path().join("graphs");
    std::fs::write(graphs.join("fast.toml"), "graph = \"pipeline\"\n").unwrap();
    std::fs::write(graphs.join("broken.toml"), "graph = \"nope\"\n").unwrap();
    let (server, url) = serve(&research, project.path());
    let profile = tempfile::tempdir().unwrap();
    let page = browser(&driver, profile.path()).await;

    // Start a run from the form.
    page.goto(&format!("{url}/#/new")).await.unwrap();
    let graph = page
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#graph"))
        .await
        .expect("the form's graph list");
    let mut offered = Vec::new();
    for option in page.find_all(Locator::Css("#graph option")).await.unwrap() {
        offered.push(option.attr("value").await.unwrap().unwrap_or_default());
    }
    assert!(
        offered.contains(&"research".to_string())
            && offered.contains(&"graphs/fast.toml".to_string())
            && !offered.iter().any(|o| o.contains("broken")),
        "{offered:?}"
    );
    graph.select_by_value("research").await.unwrap();
    until_text(&page, "label[for='input-question']", "question").await;
    type_into(&page, "#input-question", QUESTION).await;
    click(&page, "Start run").await;

    // It pauses for the plan review: where and why are shown, and the plan is editable.
    until_text(&page, "#pause", "Paused before planning_mode").await;
    until_text(&page, "#pause", "Review the research plan").await;
    let markdown = page
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#plan-markdown"))
        .await
        .expect("the plan's editor")
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    let t2 = markdown
        .lines()
        .find(|l| l.contains(T2))
        .unwrap_or_else(|| panic!("no line for t2 in the plan\n{markdown}"))
        .to_string();
    let t3 = markdown
        .lines()
        .find(|l| l.contains(" t3 "))
        .expect("t3")
        .to_string();

    // An edit the plan's checks refuse is refused with the CLI's words, and changes nothing.
    let bad = markdown.replace(&t3, &t3.replace("(after: t1)", "(after: t9)"));
    type_into(&page, "#plan-markdown", &bad).await;
    click(&page, "Save plan").await;
    until_text(&page, "#plan", "unknown dependency `t9`").await;
    until_text(&page, "#plan", "the plan is unchanged").await;

    // Dropping t2 is taken, as `graph plan --edit` would take it.
    let dropped = markdown.replace(&format!("{t2}\n"), "");
    type_into(&page, "#plan-markdown", &dropped).await;
    click(&page, "Save plan").await;
    until_text(&page, "#plan", "Plan saved.").await;
    let saved = page
        .find(Locator::Css("#plan-markdown"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(!saved.contains(T2), "t2 is gone from the plan\n{saved}");
    screenshot(&page).await;

    // Approve: the run goes on and finishes, and the page says so.
    click(&page, "Approve").await;
    until_text(&page, "#live", "ended: success").await;
    until_text(&page, "main > p", "idle").await;
    let events = page.find(Locator::Css("#events")).await.unwrap();
    let log = events.text().await.unwrap();
    assert!(log.contains("finalize started"), "{log}");

    // What it cost, priced as the graph file says; its artifacts, one opened as on disk.
    let cost = until_text(&page, "#cost", "USD ").await;
    assert!(
        cost.contains("calls") && cost.contains("tokens in"),
        "{cost}"
    );
    until_text(&page, "#artifact-files", "plan.md").await;
    page.find(Locator::XPath("//button[@aria-label='Open plan.md']"))
        .await
        .expect("the plan's file")
        .click()
        .await
        .unwrap();
    let opened = until_text(&page, "#artifact-text", "t1").await;
    // The harness gives the store's `output/` as GRAPH_OUT, which `graph serve` takes as `--out`.
    let folders: Vec<PathBuf> = std::fs::read_dir(research.db.out())
        .expect("the server wrote the run's folder under GRAPH_OUT")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "one version folder: {folders:?}");
    let on_disk = std::fs::read_to_string(folders[0].join("plan.md")).expect("plan.md");
    assert_eq!(opened.trim(), on_disk.trim(), "the page shows the file");
    assert!(
        !opened.contains(T2),
        "the file has the edited plan\n{opened}"
    );
    until_text(&page, "#artifact-name", "text/markdown").await;

    // The threads page lists it, done, with its graph and its steps.
    let here = page.current_url().await.unwrap();
    let thread = here
        .fragment()
        .and_then(|f| f.strip_prefix("/thread/"))
        .expect("the thread's page")
        .to_string();
    page.goto(&format!("{url}/#/")).await.unwrap();
    let row = until_text(&page, "tbody tr", &thread).await;
    assert!(row.contains("research") && row.contains("idle"), "{row}");
    assert!(row.contains("USD "), "its cost is listed: {row}");

    // Fork it from its first checkpoint (the oldest on the timeline): a new thread, listed.
    page.goto(&format!("{url}/#/thread/{thread}"))
        .await
        .unwrap();
    let fork = page
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::XPath(
            "(//button[starts-with(@aria-label, 'Fork from here')])[last()]",
        ))
        .await
        .expect("a fork button on the checkpoint timeline");
    fork.click().await.unwrap();
    let start = Instant::now();
    let forked = loop {
        let here = page.current_url().await.unwrap();
        let shown = here
            .fragment()
            .and_then(|f| f.strip_prefix("/thread/"))
            .map(String::from);
        match shown {
            Some(t) if t != thread => break t,
            _ => assert!(start.elapsed() < PATIENCE, "the fork's page never opened"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    until_text(&page, "h1", &forked).await;
    page.goto(&format!("{url}/#/")).await.unwrap();
    until_text(&page, "tbody", &forked).await;
    until_text(&page, "tbody", &thread).await;

    // What ran is what the page asked for: no summary of the dropped todo was paid for.
    assert_eq!(research.server.count("Summary", T2), 0, "t2 was dropped");
    assert!(research.server.count("Answer", "") >= 1, "the run answered");

    page.close().await.expect("close the browser");
    drop(driver);
    server.signal(libc::SIGTERM);
    let out = server.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
