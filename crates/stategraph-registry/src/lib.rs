//! The graph registry: named Rust graphs, the graph files that configure them, and a
//! state-erased view of a compiled graph with JSON in and out.
//!
//! - [`GraphFactory`] is what an agent implements to be runnable by name: it builds its
//!   [`CompiledGraph`] and may ship a default graph file.
//! - [`GraphFile`] is that TOML file (`graphs/<name>.toml`), plus [`Override`]s (`--set KEY=VALUE`).
//! - [`ErasedGraph`] is a compiled graph of any state type behind JSON; [`AnyFactory`] is a
//!   factory behind the same erasure.
//! - [`Registry`] maps names to factories and resolves a name or a file path to a ready graph;
//!   [`Registry::listing`] is everything a folder can run, and the graph files there that
//!   cannot be used; [`input_schema`] is what a new run of a graph takes, as a JSON schema.
//! - [`GraphFactory::artifacts`] is another: the parts of its state a graph writes as files
//!   (see [`artifacts`](stategraph_artifacts)).
//! - [`PlanEditor`] is an optional capability of a graph whose state holds a plan a person may
//!   edit while a run is paused (`graph plan`); the factory hands it out.
//! - [`TaskFiles`] is another, of a graph whose work is a folder of Markdown task files it
//!   decomposes and solves (`graph decompose`, `tree`, `solve`).
//! - [`RetentionPolicy`] is a graph file's `[retention]` table and [`sweep`] applies it to a
//!   store's threads of that graph (`retention.rs`), for `graph prune --policy` and the
//!   long-running processes' background sweeps; its item settings (`items_ttl_days`,
//!   `items_refresh_on_read`) become the runs' long-term store's `TtlConfig`
//!   ([`RetentionPolicy::items_ttl`]).
//! - [`Sweeper`] (`sweeper.rs`) is that background sweep: every interval, each graph's policy
//!   applied and the long-term store's expired items removed, the newest round readable through
//!   its [`SweeperHandle`], for long-running processes (a server, workers).
//!
//! Invariant: the registry knows graphs and the runtime, never a command line or a storage
//! backend. The CLI sits above it; agents implement its traits without knowing the CLI.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod erased;
mod file;
mod input;
mod listing;
mod plan;
mod retention;
mod settings;
mod sweeper;
mod task_files;

pub use erased::{DrawFormat, ErasedGraph, EventSender};
pub use file::{GraphFile, GraphFileError, Override};
pub use input::input_schema;
pub use listing::{BadFile, Listed, Listing};
pub use plan::{DependencyChange, PlanEditor, PlanError, PlanOp, PlanPosition};
pub use retention::{sweep, Pruned, Pruner, Removed, RetentionPolicy, Skipped, Sweep, SweepReport};
pub use settings::{decode_settings, path_setting, settings_decode_error, SettingsSchema};
pub use sweeper::{GraphSweep, Holder, SweepRound, Sweeper, SweeperHandle, SweeperStatus, Target};
pub use task_files::{Decomposed, RunStart, Start, TaskFiles, TaskFilesError, TreeStatus};

use stategraph::checkpoint::Checkpointer;
use stategraph::graph::{CompiledGraph, GraphError};
use stategraph::state::State;
use stategraph_artifacts::{ArtifactSet, ThreadArtifacts};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A named Rust graph that a graph file can configure and a registry can build.
///
/// ```
/// use std::sync::Arc;
/// use serde::{Deserialize, Serialize};
/// use stategraph_registry::{BuildError, GraphFactory, GraphFile};
/// use stategraph::{runtime::Context, CompiledGraph, State, StateGraph, END, START};
///
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Greeting { name: String, #[state(append)] text: String }
///
/// struct Hello;
///
/// impl GraphFactory for Hello {
///     type State = Greeting;
///     fn name(&self) -> &str { "hello" }
///     fn description(&self) -> &str { "Says hello" }
///     fn input_field(&self) -> Option<&str> { Some("name") }
///     fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Greeting>, BuildError> {
///         let mut g = StateGraph::<Greeting>::named("hello");
///         g.add_node("greet", |s: Arc<Greeting>, _c: Context| async move {
///             Ok(GreetingUpdate::default().text(format!("hello, {}", s.name)))
///         });
///         g.add_edge(START, "greet").add_edge("greet", END);
///         Ok(g.compile()?)
///     }
/// }
/// ```
pub trait GraphFactory: Send + Sync + 'static {
    /// The graph's state.
    type State: State;

    /// The name graph files and the command line use.
    fn name(&self) -> &str;

    /// One line saying what the graph does.
    fn description(&self) -> &str;

    /// The graph's default graph file (usually `include_str!` of `graphs/<name>.toml`), so a
    /// binary runs it from any directory. Without one, the graph runs with no settings.
    fn graph_file(&self) -> Option<&'static str> {
        None
    }

    /// The state field a plain-text input fills (`graph run NAME --input TEXT`). A run must
    /// fill it: `graph run` without it is refused before a thread is made.
    fn input_field(&self) -> Option<&str> {
        None
    }

    /// The state field that holds the run's result, shown instead of the whole state when the
    /// run is done.
    fn output_field(&self) -> Option<&str> {
        None
    }

    /// The keys and types of the graph's `[settings]`, so `--set` overrides are checked before
    /// anything runs: an unknown key or a value of the wrong type is refused, naming the key and
    /// what it expects. Usually [`SettingsSchema::of`] the type the graph reads its settings
    /// into. Without one, only the types of the keys the graph file lists are checked.
    fn settings_schema(&self) -> Option<SettingsSchema> {
        None
    }

    /// Builds the graph. Static breakpoints, limits and settings of `file` are applied by the
    /// registry afterwards; read `file` only for what changes the graph's shape.
    ///
    /// Building must not need what only a run needs (a model key, a search folder): graphs are
    /// also built to be listed, drawn, and to inspect or edit stored threads. Check those in
    /// [`preflight`](Self::preflight) and open them lazily.
    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<Self::State>, BuildError>;

    /// Checks, before a run starts or continues, that what the run needs is there (a model
    /// configured, a folder that exists), so a misconfigured run fails at once with a message
    /// saying what to set, rather than after a first paid step. By default, nothing to check.
    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        let _ = file;
        Ok(())
    }

    /// Checks a new run's input before its thread is made, so an input the run could not do its
    /// job with (a company with no data room, say) is refused with nothing left behind. `Err`
    /// says what is wrong and what there is to choose from, in the graph's own words. By
    /// default, any input that fits the state.
    fn check_input(
        &self,
        file: &GraphFile,
        input: &<Self::State as State>::Update,
    ) -> Result<(), String> {
        let _ = (file, input);
        Ok(())
    }

    /// The graph's plan editor, when its state holds a plan a person may review and edit while
    /// a run is paused (`graph plan THREAD`). By default, none.
    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>> {
        None
    }

    /// What a front end's task-tree commands need of the graph, when its work is a folder of
    /// Markdown task files (see [`TaskFiles`]). By default, none.
    fn task_files(&self) -> Option<Arc<dyn TaskFiles>> {
        None
    }

    /// The graph's artifacts: parts of its state written as files into a versioned run folder
    /// after every checkpoint, which a person may read and edit before a resume (see
    /// [`artifacts`](stategraph_artifacts)). By default, none.
    fn artifacts(&self, file: &GraphFile) -> Option<ArtifactSet<Self::State>> {
        let _ = file;
        None
    }

    /// Why a run that reached its end still failed at its job, when it did (e.g. no todo of
    /// its plan succeeded): the CLI then exits 1 with this reason, not 0. The state stays as
    /// it is (a finished thread). By default, a finished run succeeded.
    fn failure(&self, state: &Self::State) -> Option<String> {
        let _ = state;
        None
    }
}

/// A graph that could not be built from its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The graph itself is invalid, or names a node it does not have.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A setting has a value the graph cannot use.
    #[error("{}", setting_message(key, message))]
    Setting {
        /// The setting.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Something a run needs is not configured (a model, an API key); the message says how to
    /// configure it.
    #[error("{0}")]
    Unconfigured(String),
}

impl BuildError {
    /// A model that cannot be made: [`Unconfigured`](Self::Unconfigured) (saying what to set)
    /// when no provider is configured, else a bad `model` setting. For
    /// [`GraphFactory::preflight`]s that build their model with
    /// [`provider::from_env`](stategraph_llm::provider::from_env).
    ///
    /// ```
    /// use stategraph_llm::{provider, LlmError};
    /// use stategraph_registry::BuildError;
    /// let e = BuildError::from_model(LlmError::NotConfigured(provider::NOT_CONFIGURED.into()));
    /// assert!(matches!(e, BuildError::Unconfigured(_)));
    /// ```
    pub fn from_model(e: stategraph_llm::LlmError) -> BuildError {
        match e {
            stategraph_llm::LlmError::NotConfigured(message) => BuildError::Unconfigured(message),
            other => BuildError::Setting {
                key: "model".into(),
                message: other.to_string(),
            },
        }
    }
}

/// `[settings]` as a whole (its decoding names the setting itself), or one setting.
fn setting_message(key: &str, message: &str) -> String {
    match key {
        "settings" => format!("[settings]: {message}"),
        _ => format!("setting `{key}`: {message}"),
    }
}

/// A [`GraphFactory`] with its state type erased, as a registry holds it.
pub trait AnyFactory: Send + Sync {
    /// See [`GraphFactory::name`].
    fn name(&self) -> &str;
    /// See [`GraphFactory::description`].
    fn description(&self) -> &str;
    /// See [`GraphFactory::graph_file`].
    fn graph_file(&self) -> Option<&'static str>;
    /// See [`GraphFactory::input_field`].
    fn input_field(&self) -> Option<&str>;
    /// See [`GraphFactory::output_field`].
    fn output_field(&self) -> Option<&str>;
    /// See [`GraphFactory::settings_schema`].
    fn settings_schema(&self) -> Option<SettingsSchema>;
    /// Builds the graph, applies the file's static breakpoints and attaches `checkpointer`.
    fn build(
        &self,
        file: &GraphFile,
        checkpointer: Option<Arc<dyn Checkpointer>>,
    ) -> Result<Box<dyn ErasedGraph>, BuildError>;
    /// See [`GraphFactory::preflight`].
    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError>;
    /// See [`GraphFactory::check_input`]; an input that does not fit the state is left to
    /// [`ErasedGraph::check_update`] to name.
    fn check_input(&self, file: &GraphFile, input: &serde_json::Value) -> Result<(), String>;
    /// See [`GraphFactory::plan_editor`].
    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>>;
    /// See [`GraphFactory::task_files`].
    fn task_files(&self) -> Option<Arc<dyn TaskFiles>>;
    /// The graph's artifacts (see [`GraphFactory::artifacts`]), bound to the graph built from
    /// `file` and stored in `checkpointer`; `None` when it declares none.
    fn artifacts(
        &self,
        file: &GraphFile,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Option<Box<dyn ThreadArtifacts>>, BuildError>;
    /// See [`GraphFactory::failure`]; `None` also when `state` is not the graph's state.
    fn failure(&self, state: &serde_json::Value) -> Option<String>;
}

impl<F: GraphFactory> AnyFactory for F {
    fn name(&self) -> &str {
        GraphFactory::name(self)
    }
    fn description(&self) -> &str {
        GraphFactory::description(self)
    }
    fn graph_file(&self) -> Option<&'static str> {
        GraphFactory::graph_file(self)
    }
    fn input_field(&self) -> Option<&str> {
        GraphFactory::input_field(self)
    }
    fn output_field(&self) -> Option<&str> {
        GraphFactory::output_field(self)
    }
    fn settings_schema(&self) -> Option<SettingsSchema> {
        GraphFactory::settings_schema(self)
    }
    fn build(
        &self,
        file: &GraphFile,
        checkpointer: Option<Arc<dyn Checkpointer>>,
    ) -> Result<Box<dyn ErasedGraph>, BuildError> {
        let mut graph = GraphFactory::build(self, file)?
            .interrupt_before(file.interrupt_before.iter().cloned())?
            .interrupt_after(file.interrupt_after.iter().cloned())?;
        if let Some(store) = checkpointer {
            graph = graph.with_checkpointer(store);
        }
        Ok(Box::new(graph))
    }
    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        GraphFactory::preflight(self, file)
    }
    fn check_input(&self, file: &GraphFile, input: &serde_json::Value) -> Result<(), String> {
        match serde_json::from_value::<<F::State as State>::Update>(input.clone()) {
            Ok(update) => GraphFactory::check_input(self, file, &update),
            Err(_) => Ok(()),
        }
    }
    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>> {
        GraphFactory::plan_editor(self)
    }
    fn task_files(&self) -> Option<Arc<dyn TaskFiles>> {
        GraphFactory::task_files(self)
    }
    fn artifacts(
        &self,
        file: &GraphFile,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Option<Box<dyn ThreadArtifacts>>, BuildError> {
        let Some(set) = GraphFactory::artifacts(self, file) else {
            return Ok(None);
        };
        let graph = GraphFactory::build(self, file)?.with_checkpointer(checkpointer);
        let bound = set.bind(&graph).map_err(|e| BuildError::Setting {
            key: "artifacts".into(),
            message: e.to_string(),
        })?;
        Ok(Some(Box::new(bound)))
    }
    fn failure(&self, state: &serde_json::Value) -> Option<String> {
        let state = serde_json::from_value::<F::State>(state.clone()).ok()?;
        GraphFactory::failure(self, &state)
    }
}

/// Why a graph name or file could not be turned into a graph.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No graph of that name, and not a file path.
    #[error("no graph named `{name}`; registered graphs: {known} (or give the path of a .toml graph file)")]
    UnknownGraph {
        /// The name given.
        name: String,
        /// The registered names.
        known: String,
    },
    /// A graph file names a graph that is not registered.
    #[error("graph file {origin} configures graph `{graph}`, which is not registered; registered graphs: {known}")]
    UnregisteredGraph {
        /// The file.
        origin: String,
        /// The graph it names.
        graph: String,
        /// The registered names.
        known: String,
    },
    /// The graph file cannot be read. (`source` says why; it is not repeated in the message,
    /// so a report that prints the chain of causes prints it once.)
    #[error("cannot read graph file {path}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The graph file is invalid.
    #[error(transparent)]
    File(#[from] GraphFileError),
    /// The graph cannot be built from the file, or a run of it cannot start (see
    /// [`GraphFactory::preflight`]). `source` says why and is not repeated in the message.
    #[error("{}", if graph == origin { format!("graph `{graph}`") } else { format!("graph `{graph}` ({origin})") })]
    Build {
        /// The graph.
        graph: String,
        /// The file.
        origin: String,
        /// Why.
        #[source]
        source: BuildError,
    },
    /// A new run's input that the graph refuses (see [`GraphFactory::check_input`]).
    #[error("the input of graph `{graph}`: {message}")]
    Input {
        /// The graph.
        graph: String,
        /// What is wrong with the input.
        message: String,
    },
}

/// A graph resolved from a name or a file: the file as configured and the factory to build it.
#[derive(Clone)]
pub struct Resolved {
    /// The graph file after overrides.
    pub file: GraphFile,
    /// How it was named: a registered name or the path given.
    pub origin: String,
    /// The graph file read from disk: the path given, or `graphs/NAME.toml` found for a name;
    /// `None` for a graph's built-in copy.
    pub path: Option<PathBuf>,
    /// The factory of the graph the file names.
    pub factory: Arc<dyn AnyFactory>,
}

/// The rest of a path written from the home folder (`~` or `~/rest`), as a shell expands it;
/// `None` for any other path, `~user/...` included.
fn under_home(text: &str) -> Option<&str> {
    match text.strip_prefix('~')? {
        "" => Some(""),
        rest => rest.strip_prefix('/').map(|r| r.trim_start_matches('/')),
    }
}

impl Resolved {
    /// What the graph's settings may hold: the schema its factory declares, else the types of
    /// the keys its graph file's `[settings]` lists (other keys let through).
    pub fn settings_schema(&self) -> SettingsSchema {
        self.factory
            .settings_schema()
            .unwrap_or_else(|| SettingsSchema::from_example(&self.file.settings))
    }

    /// The path settings (see [`path_setting`]) this run gives as relative paths, each made
    /// absolute against `base` (the folder the run starts in), as `KEY="PATH"` overrides to keep
    /// with the thread, so a resume from another folder reads the same files. A path starting
    /// with `~/` (or `~` alone) is taken under `home`, as a shell would have expanded it had it
    /// not been quoted. Left as given, for the graph to read: `~user/...`, a `~` with no `home`,
    /// and a path that names nothing under `base`, not even a folder to be made there (its
    /// parent is missing too), such as a sample a graph finds elsewhere.
    ///
    /// ```
    /// # use std::path::Path;
    /// # fn pins(resolved: &stategraph_registry::Resolved) -> Vec<String> {
    /// resolved.absolute_path_overrides(Path::new("/work"), Some(Path::new("/home/ann")))
    /// # }
    /// ```
    pub fn absolute_path_overrides(&self, base: &Path, home: Option<&Path>) -> Vec<String> {
        let Some(schema) = self.factory.settings_schema() else {
            return Vec::new();
        };
        let settings = serde_json::Value::Object(self.file.settings.clone());
        schema
            .path_keys()
            .into_iter()
            .filter_map(|key| {
                let text = key
                    .split('.')
                    .try_fold(&settings, |v, part| v.get(part))?
                    .as_str()?;
                let path = Path::new(text);
                let absolute = match (under_home(text), home) {
                    (Some(""), Some(home)) => home.to_path_buf(),
                    (Some(rest), Some(home)) => home.join(rest),
                    _ if text.is_empty() || text.starts_with('~') || path.is_absolute() => {
                        return None
                    }
                    _ => {
                        let relative: PathBuf = path
                            .components()
                            .filter(|c| !matches!(c, std::path::Component::CurDir))
                            .collect();
                        let absolute = base.join(relative);
                        let names_something =
                            absolute.exists() || absolute.parent().is_some_and(Path::is_dir);
                        if !names_something {
                            return None;
                        }
                        absolute
                    }
                };
                let value = toml::Value::String(absolute.to_str()?.to_string());
                Some(format!("{key}={value}"))
            })
            .collect()
    }

    /// Builds the graph, attached to `checkpointer`.
    pub fn build(
        &self,
        checkpointer: Option<Arc<dyn Checkpointer>>,
    ) -> Result<Box<dyn ErasedGraph>, RegistryError> {
        self.factory
            .build(&self.file, checkpointer)
            .map_err(|source| RegistryError::Build {
                graph: self.file.graph.clone(),
                origin: self.origin.clone(),
                source,
            })
    }

    /// The graph's artifacts, bound to the graph attached to `checkpointer` (`None`: it
    /// declares none).
    pub fn artifacts(
        &self,
        checkpointer: Arc<dyn Checkpointer>,
    ) -> Result<Option<Box<dyn ThreadArtifacts>>, RegistryError> {
        self.factory
            .artifacts(&self.file, checkpointer)
            .map_err(|source| RegistryError::Build {
                graph: self.file.graph.clone(),
                origin: self.origin.clone(),
                source,
            })
    }

    /// Checks that a run of the graph can start (see [`GraphFactory::preflight`]).
    ///
    /// ```
    /// use stategraph_registry::Registry;
    /// let mut registry = Registry::new();
    /// registry.extend(stategraph_agents::builtin_factories());
    /// assert!(registry.resolve("pipeline", &[]).unwrap().preflight().is_ok());
    /// ```
    pub fn preflight(&self) -> Result<(), RegistryError> {
        self.factory
            .preflight(&self.file)
            .map_err(|source| RegistryError::Build {
                graph: self.file.graph.clone(),
                origin: self.origin.clone(),
                source,
            })
    }

    /// Checks a new run's input (JSON, an update of the graph's state) before its thread is
    /// made (see [`GraphFactory::check_input`]).
    ///
    /// ```
    /// use stategraph_registry::{Registry, RegistryError};
    /// let mut registry = Registry::new();
    /// registry.extend(stategraph_agents::builtin_factories());
    /// let memo = registry.resolve("memo", &[]).unwrap();
    /// let e = memo.check_input(&serde_json::json!({"company": "Acme"})).unwrap_err();
    /// assert!(matches!(e, RegistryError::Input { .. }));
    /// assert!(e.to_string().contains("fernstone"), "{e}");
    /// ```
    pub fn check_input(&self, input: &serde_json::Value) -> Result<(), RegistryError> {
        self.factory
            .check_input(&self.file, input)
            .map_err(|message| RegistryError::Input {
                graph: self.file.graph.clone(),
                message,
            })
    }
}

/// Named graph factories.
///
/// ```
/// use stategraph_registry::Registry;
/// let mut registry = Registry::new();
/// registry.extend(stategraph_agents::builtin_factories());
/// let pipeline = registry.resolve("pipeline", &[]).unwrap();
/// assert_eq!(pipeline.file.graph, "pipeline");
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn AnyFactory>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a factory; one registered later under the same name replaces it.
    pub fn register(&mut self, factory: impl GraphFactory) {
        self.insert(Arc::new(factory));
    }

    /// Adds an already erased factory.
    pub fn insert(&mut self, factory: Arc<dyn AnyFactory>) {
        self.factories.insert(factory.name().to_string(), factory);
    }

    /// Adds several erased factories.
    pub fn extend(&mut self, factories: impl IntoIterator<Item = Arc<dyn AnyFactory>>) {
        for f in factories {
            self.insert(f);
        }
    }

    /// The factory registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn AnyFactory>> {
        self.factories.get(name)
    }

    /// Every factory, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn AnyFactory>> {
        self.factories.values()
    }

    fn known(&self) -> String {
        if self.factories.is_empty() {
            "none".to_string()
        } else {
            self.factories
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// True when `graph` reads as a file path rather than a registered name.
    pub fn is_path(graph: &str) -> bool {
        graph.ends_with(".toml") || graph.contains('/') || graph.contains(std::path::MAIN_SEPARATOR)
    }

    /// `graphs/NAME.toml` under the current directory, when it exists: a registered name
    /// resolves to it before its built-in copy, so the graph file a project edits is the one
    /// that runs.
    pub fn local_file(name: &str) -> Option<PathBuf> {
        let path = Path::new("graphs").join(format!("{name}.toml"));
        path.is_file().then_some(path)
    }

    /// Turns a registered name or the path of a graph file into a configured graph, applying
    /// `overrides`. A name is read from [`local_file`](Self::local_file) when there is one,
    /// else from the graph's built-in file.
    pub fn resolve(&self, graph: &str, overrides: &[Override]) -> Result<Resolved, RegistryError> {
        let on_disk = match Self::is_path(graph) {
            true => Some(PathBuf::from(graph)),
            false => Self::local_file(graph).filter(|_| self.get(graph).is_some()),
        };
        let path = on_disk.clone();
        let (text, origin) = if let Some(file) = on_disk {
            let text = std::fs::read_to_string(&file).map_err(|source| RegistryError::Read {
                path: file.display().to_string(),
                source,
            })?;
            (text, file.display().to_string())
        } else {
            let factory = self.get(graph).ok_or_else(|| RegistryError::UnknownGraph {
                name: graph.to_string(),
                known: self.known(),
            })?;
            let text = match factory.graph_file() {
                Some(text) => text.to_string(),
                None => format!("graph = {}", toml::Value::String(graph.to_string())),
            };
            (text, graph.to_string())
        };
        let factory_of = |graph: &str| {
            self.get(graph)
                .cloned()
                .ok_or_else(|| RegistryError::UnregisteredGraph {
                    origin: origin.clone(),
                    graph: graph.to_string(),
                    known: self.known(),
                })
        };
        // Overrides are checked against the graph's settings before they are applied, so a
        // wrong key or type is named as the user wrote it.
        let named = toml::from_str::<toml::Table>(&text).ok().and_then(|t| {
            let graph = t.get("graph")?.as_str()?.to_string();
            self.get(&graph)?.settings_schema()
        });
        let known = named.map(|s| s.key_paths()).unwrap_or_default();
        file::check_top_level(&text, &origin, &known)?;
        let base = GraphFile::parse(&text, &origin, &[])?;
        let schema = factory_of(&base.graph)?
            .settings_schema()
            .unwrap_or_else(|| SettingsSchema::from_example(&base.settings));
        // The file's own settings are checked as overrides are: before a thread exists.
        schema
            .check_table(&base.settings)
            .map_err(|message| GraphFileError::Invalid {
                origin: origin.clone(),
                message: format!("graph `{}`: {message}", base.graph),
            })?;
        for o in overrides {
            o.check(&base.graph, &schema)?;
        }
        let file = GraphFile::parse(&text, &origin, overrides)?;
        let factory = factory_of(&file.graph)?;
        Ok(Resolved {
            file,
            origin,
            path,
            factory,
        })
    }
}
