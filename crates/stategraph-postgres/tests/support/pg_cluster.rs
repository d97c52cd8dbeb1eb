//! A throwaway Postgres cluster for tests: real Postgres, nothing mocked.
//!
//! `initdb` and `pg_ctl` come from PATH or from the Debian `postgresql` package
//! (`/usr/lib/postgresql/*/bin`, the newest). The cluster lives in a temporary folder, listens on
//! a free port of 127.0.0.1 (with TLS, from a self-signed certificate; one user must give a
//! password, the others are trusted) and keeps its socket in the same folder.
//! initdb refuses to run as root, so when the tests run as
//! root (CI does) the cluster runs as the `postgres` user the Debian package creates (`nobody`
//! when there is none) and owns its folder.
//!
//! One cluster per test binary, started by the first test that asks ([`cluster`]) and shared:
//! each test takes a database of its own ([`Cluster::database`]), dropped when the test ends.
//! A static is never dropped, so a watchdog process stops the cluster and removes its folder
//! once the test process is gone, however it ended.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The one user who must give a password, for tests of a refused one (the others are trusted:
/// a password checked on every new connection slows a debug build's tests down).
pub const PASSWORD_USER: &str = "sg_password_user";
pub const PASSWORD: &str = "stategraph-test";

/// The running cluster of this test binary.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match Cluster::start() {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a test Postgres cluster: {e}"),
    })
}

pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
    tls: bool,
}

/// A database of its own for one test, dropped with it.
pub struct TestDatabase {
    name: String,
    url: String,
}

impl TestDatabase {
    /// `postgres://` URL of the database, TLS off.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Whatever a test left connected is cut off.
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        if let Err(e) = cluster().admin(&sql) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

impl Cluster {
    /// A fresh, empty database.
    pub fn database(&self) -> TestDatabase {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
        if let Err(e) = self.admin(&format!("CREATE DATABASE \"{name}\"")) {
            panic!("cannot create test database {name}: {e}");
        }
        TestDatabase {
            url: self.url(&name),
            name,
        }
    }

    /// The URL of database `name` as the superuser, TLS off.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{name}?sslmode=disable",
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server offers TLS (it does when `openssl` made it a certificate).
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Runs `sql` in the `postgres` database (see [`sql`](Self::sql)).
    pub fn admin(&self, sql: &str) -> Result<(), String> {
        self.sql("postgres", sql)
    }

    /// Runs `sql` in `database` as the superuser, on a thread and a runtime of its own, so it
    /// works from a test's async code and from `Drop` alike.
    pub fn sql(&self, database: &str, sql: &str) -> Result<(), String> {
        let (url, sql) = (self.url(database), sql.to_string());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                client.batch_execute(&sql).await.map_err(|e| e.to_string())
            })
        })
        .join()
        .map_err(|_| "the admin thread panicked".to_string())?
    }

    fn start() -> Result<Cluster, String> {
        let bin = binaries().ok_or(
            "no `initdb` on PATH nor in /usr/lib/postgresql/*/bin: install the Debian \
             `postgresql` package (.ci/run does)",
        )?;
        let run_as = server_user();
        let dir = tempfile::Builder::new()
            .prefix("stategraph-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?
            // The watchdog removes it, as the server's owner.
            .keep();
        give(&dir, run_as)?;
        let data = dir.join("data");
        run(
            Command::new(bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync"])
                .arg("--auth=trust"),
            &dir,
            run_as,
        )?;
        let hba = data.join("pg_hba.conf");
        let rules = format!(
            "local all all trust\n\
             host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\n"
        );
        std::fs::write(&hba, rules).map_err(|e| format!("{}: {e}", hba.display()))?;
        let tls = certificate(&data, run_as);
        for _ in 0..3 {
            let port = free_port()?;
            configure(&data, &dir, port, tls)?;
            let started = run(
                Command::new(bin.join("pg_ctl"))
                    .arg("-D")
                    .arg(&data)
                    .arg("-l")
                    .arg(dir.join("server.log"))
                    .args(["-w", "-t", "60", "start"]),
                &dir,
                run_as,
            );
            match started {
                Ok(()) => {
                    watchdog(&bin, &data, &dir, run_as)?;
                    let cluster = Cluster {
                        bin,
                        data,
                        port,
                        run_as,
                        tls,
                    };
                    cluster.admin(&format!(
                        "CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'"
                    ))?;
                    return Ok(cluster);
                }
                // Most likely another process took the port meanwhile: try another.
                Err(e) => eprintln!("test Postgres did not start on port {port}: {e}"),
            }
        }
        Err(format!(
            "the server did not start; its log: {}",
            dir.join("server.log").display()
        ))
    }

    /// Stops the server at once (as a crash would), for tests of what a client then says.
    #[allow(dead_code)]
    pub fn stop_now(&self) -> Result<(), String> {
        let dir = self.data.parent().unwrap_or(Path::new("/"));
        run(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "stop"]),
            dir,
            self.run_as,
        )
    }
}

impl Cluster {
    /// Restarts the server as a crash would (`pg_ctl restart -m immediate`): every connection
    /// is cut, and the server recovers from its log before it accepts new ones. Returns once it
    /// does.
    #[allow(dead_code)]
    pub fn restart_now(&self) -> Result<(), String> {
        let dir = self.data.parent().unwrap_or(Path::new("/"));
        run(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(dir.join("server.log"))
                .args(["-m", "immediate", "-w", "-t", "60", "restart"]),
            dir,
            self.run_as,
        )
    }
}

/// The folder holding `initdb` and `pg_ctl`.
fn binaries() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|d| has_both(d)) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// The user the server runs as when the tests run as root; `None` runs it as ourselves.
fn server_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    ["postgres", "nobody"].iter().find_map(|name| {
        let name = std::ffi::CString::new(*name).ok()?;
        // SAFETY: a valid C string; the returned record is read at once, before any other call
        // that could reuse its storage.
        let entry = unsafe { libc::getpwnam(name.as_ptr()) };
        if entry.is_null() {
            return None;
        }
        // SAFETY: checked non-null above.
        let entry = unsafe { &*entry };
        Some((entry.pw_uid, entry.pw_gid))
    })
}

fn give(path: &Path, run_as: Option<(u32, u32)>) -> Result<(), String> {
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", path.display()))?;
    }
    let mode = if path.is_dir() { 0o700 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// Runs a command of the server's as its user, in `dir`; its output becomes the error.
fn run(command: &mut Command, dir: &Path, run_as: Option<(u32, u32)>) -> Result<(), String> {
    command.current_dir(dir).stdin(Stdio::null());
    for var in ["PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE"] {
        command.env_remove(var);
    }
    if let Some((uid, gid)) = run_as {
        command.uid(uid).gid(gid);
    }
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A self-signed certificate for the server, so `sslmode=require` can be tried. False when
/// `openssl` is missing (the TLS test then says so).
fn certificate(data: &Path, run_as: Option<(u32, u32)>) -> bool {
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .arg("-keyout")
        .arg(data.join("server.key"))
        .arg("-out")
        .arg(data.join("server.crt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    made && ["server.key", "server.crt"]
        .iter()
        .all(|f| give(&data.join(f), run_as).is_ok())
}

fn configure(data: &Path, dir: &Path, port: u16, tls: bool) -> Result<(), String> {
    let mut conf = format!(
        "\n# stategraph tests\nlisten_addresses = '127.0.0.1'\nport = {port}\n\
         unix_socket_directories = '{}'\nmax_connections = 200\nshared_buffers = 16MB\n\
         fsync = off\nfull_page_writes = off\n",
        dir.display()
    );
    if tls {
        conf.push_str("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
    }
    // Written whole each time: a retry on another port replaces the earlier lines.
    let path = data.join("postgresql.auto.conf");
    std::fs::write(&path, conf).map_err(|e| format!("{}: {e}", path.display()))
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Stops the server and removes its folder once this process is gone.
fn watchdog(bin: &Path, data: &Path, dir: &Path, run_as: Option<(u32, u32)>) -> Result<(), String> {
    let script = format!(
        "while [ -e /proc/{pid} ]; do sleep 0.5; done; \
         '{pg_ctl}' -D '{data}' -m immediate -w stop >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let mut command = Command::new("sh");
    command
        .args(["-c", &script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C of the tests does not stop it before its work.
        .process_group(0);
    if let Some((uid, gid)) = run_as {
        command.uid(uid).gid(gid);
    }
    command
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the watchdog: {e}"))
}
