//! The load driver of the server benchmark (`benches/server/`), in Rust: what `load.py` does,
//! request for request, at a fraction of its CPU, so that on a 2-core machine the driver does not
//! cap the runs per second it measures (README.md, "The driver").
//!
//! Speaks LangGraph's Agent Server API over HTTP/1.1 to 127.0.0.1 only:
//! - `wait`: CLIENTS concurrent clients, each in a loop: create a thread (POST /threads), then
//!   POST /threads/{id}/runs/wait and check the final state. Runs per second = runs / wall time.
//! - `stream`: the same with POST /threads/{id}/runs/stream (stream_mode "updates"), timing from
//!   sending the request to the first Server-Sent Event of any kind and to the first `updates`
//!   event, and checking the number of node updates.
//!
//! At most RUNS runs in all and at most CAP seconds (runs in flight at the cap are finished and
//! counted). Every run's result is checked; a wrong one fails the measurement. Prints one JSON
//! object with the same keys as `load.py`, plus `"driver": "rust"`; exits 1 if a run failed.
//!
//! One thread (a tokio current-thread runtime) runs all clients; they share one reqwest
//! connection pool, so each client's next request goes over a kept-alive connection.
//!
//! ```text
//! cargo build --release -p stategraph-server --example load_driver
//! target/release/examples/load_driver --url http://127.0.0.1:8123 --graph chain10 --mode wait
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use serde::Serialize;
use serde_json::Value;

#[derive(Parser)]
#[command(about = "The load driver of the server benchmark (benches/server/README.md)")]
struct Args {
    /// The server, on 127.0.0.1 or localhost.
    #[arg(long)]
    url: String,
    #[arg(long, value_enum)]
    graph: Graph,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long, default_value_t = 20)]
    clients: usize,
    /// Runs in all, over every client.
    #[arg(long, default_value_t = 400)]
    runs: usize,
    /// Seconds at most; runs in flight then are finished and counted.
    #[arg(long, default_value_t = 60.0)]
    cap: f64,
}

#[derive(Clone, Copy, ValueEnum)]
enum Graph {
    Chain10,
    Fanout,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Mode {
    Wait,
    Stream,
}

impl Graph {
    fn name(self) -> &'static str {
        match self {
            Graph::Chain10 => "chain10",
            Graph::Fanout => "fanout",
        }
    }

    /// The input a run starts from, as JSON text.
    fn input(self) -> &'static str {
        match self {
            Graph::Chain10 => r#"{"count":0}"#,
            Graph::Fanout => r#"{"results":[]}"#,
        }
    }

    /// Whether `v` is the final state a run must end in (load.py's GRAPHS).
    fn ok(self, v: &Value) -> bool {
        match self {
            Graph::Chain10 => v.get("count").and_then(Value::as_f64) == Some(10.0),
            Graph::Fanout => match v.get("results").and_then(Value::as_array) {
                Some(r) => r.len() == 11 && r[10].as_f64() == Some(10.0),
                None => false,
            },
        }
    }

    /// How many `updates` events a stream of one run carries (chain: n0..n9; fan-out: split,
    /// w0..w9, join).
    fn updates(self) -> usize {
        match self {
            Graph::Chain10 => 10,
            Graph::Fanout => 12,
        }
    }
}

/// One finished, checked run: seconds from the start of the run (thread creation) to its end,
/// and for a stream from sending the request to the first event and to the first `updates`.
struct Sample {
    latency: f64,
    first_any: Option<f64>,
    first_update: Option<f64>,
}

/// What one client does: the same as load.py's `client()`, with its own deadline check.
struct Load {
    http: reqwest::Client,
    url: String,
    graph: Graph,
    mode: Mode,
    tickets: AtomicUsize,
    runs: usize,
    deadline: Instant,
    wait_body: bytes::Bytes,
    stream_body: bytes::Bytes,
}

/// An HTTP error with its causes (reqwest's own message hides them: "error sending request").
fn why(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out += &format!(": {c}");
        cause = c.source();
    }
    out
}

fn head(bytes: &[u8], n: usize) -> String {
    String::from_utf8_lossy(bytes).chars().take(n).collect()
}

impl Load {
    async fn new_thread(&self) -> Result<String, String> {
        let r = self
            .http
            .post(format!("{}/threads", self.url))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .map_err(|e| format!("POST /threads: {}", why(&e)))?;
        let status = r.status();
        let body = r
            .bytes()
            .await
            .map_err(|e| format!("POST /threads: {}", why(&e)))?;
        if status != 200 {
            return Err(format!(
                "POST /threads: {} {}",
                status.as_u16(),
                head(&body, 200)
            ));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("POST /threads: {e}: {}", head(&body, 200)))?;
        match v.get("thread_id").and_then(Value::as_str) {
            Some(id) => Ok(id.to_owned()),
            None => Err(format!(
                "POST /threads: no thread_id in {}",
                head(&body, 200)
            )),
        }
    }

    async fn one_wait(&self) -> Result<Sample, String> {
        let t = Instant::now();
        let graph = self.graph.name();
        let tid = self.new_thread().await?;
        let fail = |e: reqwest::Error| format!("runs/wait on {graph}: {}", why(&e));
        let r = self
            .http
            .post(format!("{}/threads/{tid}/runs/wait", self.url))
            .header("content-type", "application/json")
            .body(self.wait_body.clone())
            .send()
            .await
            .map_err(fail)?;
        let status = r.status();
        let body = r.bytes().await.map_err(fail)?;
        let ok = status == 200
            && serde_json::from_slice::<Value>(&body).is_ok_and(|v| self.graph.ok(&v));
        if !ok {
            return Err(format!(
                "runs/wait on {graph}: {} {}",
                status.as_u16(),
                head(&body, 300)
            ));
        }
        Ok(Sample {
            latency: t.elapsed().as_secs_f64(),
            first_any: None,
            first_update: None,
        })
    }

    async fn one_stream(&self) -> Result<Sample, String> {
        let t = Instant::now();
        let graph = self.graph.name();
        let tid = self.new_thread().await?;
        let fail = |e: reqwest::Error| format!("runs/stream on {graph}: {}", why(&e));
        let t0 = Instant::now();
        let mut r = self
            .http
            .post(format!("{}/threads/{tid}/runs/stream", self.url))
            .header("content-type", "application/json")
            .body(self.stream_body.clone())
            .send()
            .await
            .map_err(fail)?;
        if r.status() != 200 {
            let status = r.status().as_u16();
            let body = r.bytes().await.map_err(fail)?;
            return Err(format!(
                "runs/stream on {graph}: {status} {}",
                head(&body, 300)
            ));
        }
        let mut sse = Events::default();
        while let Some(chunk) = r.chunk().await.map_err(fail)? {
            sse.feed(&chunk, t0, graph)?;
        }
        sse.finish(t0, graph)?;
        let expected = self.graph.updates();
        if sse.updates != expected {
            return Err(format!(
                "runs/stream on {graph}: {} updates, expected {expected}; events {:?}",
                sse.updates, sse.kinds
            ));
        }
        Ok(Sample {
            latency: t.elapsed().as_secs_f64(),
            first_any: sse.first_any,
            first_update: sse.first_update,
        })
    }

    /// One client: takes tickets until none is left or the deadline has passed; stops at its
    /// first failed run (load.py's `client()`).
    async fn client(self: Arc<Self>) -> (Vec<Sample>, Option<String>) {
        let mut samples = Vec::new();
        while self.tickets.fetch_add(1, Ordering::Relaxed) < self.runs {
            if Instant::now() > self.deadline {
                break;
            }
            let out = match self.mode {
                Mode::Wait => self.one_wait().await,
                Mode::Stream => self.one_stream().await,
            };
            match out {
                Ok(s) => samples.push(s),
                Err(e) => return (samples, Some(e)),
            }
        }
        (samples, None)
    }
}

/// The Server-Sent Events of one stream, read line by line as load.py reads them (httpx's
/// `aiter_lines`: a line ends at `\n`, `\r\n` or `\r`): `event:` names the event, an empty line
/// ends it.
#[derive(Default)]
struct Events {
    /// The bytes of a line not yet ended.
    partial: Vec<u8>,
    /// A `\r` ended the last chunk: a `\n` opening the next one belongs to it.
    after_cr: bool,
    event: Option<String>,
    kinds: Vec<String>,
    updates: usize,
    first_any: Option<f64>,
    first_update: Option<f64>,
}

impl Events {
    fn feed(&mut self, chunk: &[u8], t0: Instant, graph: &str) -> Result<(), String> {
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(b'\n') = rest.first() {
                rest = &rest[1..];
            }
        }
        while let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (line, end) = (&rest[..i], rest[i]);
            rest = &rest[i + 1..];
            if end == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            if self.partial.is_empty() {
                self.line(line, t0, graph)?;
            } else {
                self.partial.extend_from_slice(line);
                let whole = std::mem::take(&mut self.partial);
                self.line(&whole, t0, graph)?;
            }
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// The end of the body: a last line without its line end still counts.
    fn finish(&mut self, t0: Instant, graph: &str) -> Result<(), String> {
        if !self.partial.is_empty() {
            let whole = std::mem::take(&mut self.partial);
            self.line(&whole, t0, graph)?;
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], t0: Instant, graph: &str) -> Result<(), String> {
        if let Some(name) = line.strip_prefix(b"event:") {
            self.event = Some(String::from_utf8_lossy(name).trim().to_owned());
        } else if line.is_empty() {
            let Some(event) = self.event.take() else {
                return Ok(());
            };
            let now = t0.elapsed().as_secs_f64();
            self.first_any.get_or_insert(now);
            if event == "updates" {
                self.updates += 1;
                self.first_update.get_or_insert(now);
            }
            if event == "error" {
                return Err(format!("runs/stream on {graph} sent an error event"));
            }
            self.kinds.push(event);
        }
        Ok(())
    }
}

/// The p-th percentile (nearest rank) of xs, in milliseconds (load.py's `pct`).
fn pct(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = (p / 100.0 * s.len() as f64).ceil() as i64 - 1;
    let k = rank.clamp(0, s.len() as i64 - 1) as usize;
    Some(round(s[k] * 1000.0, 2))
}

fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct it is given and keeps no
    // pointer to it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// The JSON line load.py prints, key for key, plus which driver made it.
#[derive(Serialize)]
struct Report {
    graph: &'static str,
    mode: &'static str,
    clients: usize,
    runs: usize,
    errors: Vec<String>,
    seconds: f64,
    runs_per_s: Option<f64>,
    latency_ms_p50: Option<f64>,
    latency_ms_p95: Option<f64>,
    driver_cpu_s: f64,
    driver: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_event_ms_p50: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_event_ms_p95: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_update_ms_p50: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_update_ms_p95: Option<Option<f64>>,
}

async fn drive(a: &Args) -> Result<Report, String> {
    // No proxy from the environment (httpx's trust_env=False); HTTP/1.1 only (reqwest is built
    // without http2 here); httpx's timeout=120 is per connect and per read, as these are.
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(a.clients)
        .connect_timeout(Duration::from_secs(120))
        .read_timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let graph = a.graph.name();
    let input = a.graph.input();
    let load = Arc::new(Load {
        http,
        url: a.url.trim_end_matches('/').to_owned(),
        graph: a.graph,
        mode: a.mode,
        tickets: AtomicUsize::new(0),
        runs: a.runs,
        deadline: Instant::now() + Duration::from_secs_f64(a.cap),
        wait_body: format!(r#"{{"assistant_id":"{graph}","input":{input}}}"#).into(),
        stream_body: format!(
            r#"{{"assistant_id":"{graph}","input":{input},"stream_mode":["updates"]}}"#
        )
        .into(),
    });
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..a.clients)
        .map(|_| tokio::spawn(load.clone().client()))
        .collect();
    let (mut samples, mut errors) = (Vec::new(), Vec::new());
    for t in tasks {
        let (s, e) = t.await.map_err(|e| format!("a client task failed: {e}"))?;
        samples.extend(s);
        errors.extend(e);
    }
    let wall = t0.elapsed().as_secs_f64();
    let driver_cpu = cpu_seconds() - cpu0;
    let lat: Vec<f64> = samples.iter().map(|s| s.latency).collect();
    let pick =
        |f: fn(&Sample) -> Option<f64>| -> Vec<f64> { samples.iter().filter_map(f).collect() };
    let stream = a.mode == Mode::Stream;
    let (any, upd) = (pick(|s| s.first_any), pick(|s| s.first_update));
    let when = |xs: &[f64], p| stream.then(|| pct(xs, p));
    errors.truncate(3);
    Ok(Report {
        graph,
        mode: if stream { "stream" } else { "wait" },
        clients: a.clients,
        runs: samples.len(),
        errors,
        seconds: round(wall, 3),
        runs_per_s: (wall > 0.0).then(|| round(samples.len() as f64 / wall, 1)),
        latency_ms_p50: pct(&lat, 50.0),
        latency_ms_p95: pct(&lat, 95.0),
        driver_cpu_s: round(driver_cpu, 3),
        driver: "rust",
        first_event_ms_p50: when(&any, 50.0),
        first_event_ms_p95: when(&any, 95.0),
        first_update_ms_p50: when(&upd, 50.0),
        first_update_ms_p95: when(&upd, 95.0),
    })
}

fn main() -> ExitCode {
    let a = Args::parse();
    let host = reqwest::Url::parse(&a.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned));
    if !matches!(host.as_deref(), Some("127.0.0.1" | "localhost")) {
        eprintln!(
            "the benchmark only talks to 127.0.0.1 (got --url {})",
            a.url
        );
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(drive(&a)) {
        Ok(report) => {
            let failed = !report.errors.is_empty();
            match serde_json::to_string(&report) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("cannot write the report: {e}");
                    return ExitCode::from(2);
                }
            }
            if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan-out run's stream as `graph serve` sends it (ids and data cut short).
    fn fanout_body(eol: &str) -> String {
        let mut events = vec![("metadata", "{\"attempt\":1}".to_owned())];
        events.push(("updates", "{\"split\":{}}".to_owned()));
        for i in 0..10 {
            events.push(("updates", format!("{{\"w{i}\":{{\"results\":[{i}]}}}}")));
        }
        events.push(("updates", "{\"join\":{\"results\":[10]}}".to_owned()));
        events.push(("end", "{\"status\":\"success\"}".to_owned()));
        let mut body = String::new();
        for (id, (event, data)) in events.iter().enumerate() {
            body += &format!("id: {id}{eol}event: {event}{eol}data: {data}{eol}{eol}");
        }
        body
    }

    fn read(chunks: &[&[u8]]) -> Events {
        let (mut sse, t0) = (Events::default(), Instant::now());
        for c in chunks {
            sse.feed(c, t0, "fanout").unwrap();
        }
        sse.finish(t0, "fanout").unwrap();
        sse
    }

    /// Every event is counted once whatever the line ends and wherever the body is cut into
    /// chunks, as httpx's `aiter_lines` would read it.
    #[test]
    fn counts_each_event_once_across_chunk_boundaries() {
        let mut want = vec!["metadata"];
        want.extend(["updates"; 12]);
        want.push("end");
        for eol in ["\n", "\r\n", "\r"] {
            let body = fanout_body(eol);
            let b = body.as_bytes();
            for cut in 0..=b.len() {
                let sse = read(&[&b[..cut], &b[cut..]]);
                assert_eq!(sse.kinds, want, "eol {eol:?}, cut at {cut}");
                assert_eq!(sse.updates, 12);
                assert!(sse.first_any.is_some() && sse.first_update.is_some());
            }
            let bytes: Vec<&[u8]> = b.chunks(1).collect();
            assert_eq!(read(&bytes).kinds, want, "eol {eol:?}, one byte a chunk");
        }
    }

    #[test]
    fn an_error_event_fails_the_run() {
        let mut sse = Events::default();
        let err = sse.feed(b"event: error\ndata: {}\n\n", Instant::now(), "chain10");
        assert_eq!(
            err,
            Err("runs/stream on chain10 sent an error event".to_owned())
        );
    }

    /// load.py's nearest-rank percentile: ceil(p/100 * n) - 1, clamped, in ms.
    #[test]
    fn percentiles_are_nearest_rank_like_load_py() {
        let xs: Vec<f64> = (1..=20).map(|i| i as f64 / 1000.0).collect();
        assert_eq!(pct(&xs, 50.0), Some(10.0));
        assert_eq!(pct(&xs, 95.0), Some(19.0));
        assert_eq!(pct(&[0.5], 95.0), Some(500.0));
        assert_eq!(pct(&[], 50.0), None);
    }

    #[test]
    fn final_states_are_checked_like_load_py() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert!(Graph::Chain10.ok(&v(r#"{"count":10}"#)));
        assert!(!Graph::Chain10.ok(&v(r#"{"count":9}"#)));
        let full: Vec<u32> = (0..=10).collect();
        assert!(Graph::Fanout.ok(&v(&format!("{{\"results\":{full:?}}}"))));
        assert!(!Graph::Fanout.ok(&v(r#"{"results":[0,1,2,3,4,5,6,7,8,9]}"#)));
        assert!(!Graph::Fanout.ok(&v("[]")));
    }
}
