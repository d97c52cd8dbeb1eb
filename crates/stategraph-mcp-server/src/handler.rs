//! The protocol's side: what the server says of itself, `tools/list`, and `tools/call`
//! dispatched to a run, a read or a listing. A call that goes wrong is a tool error the client
//! shows (`isError`), never a protocol error, except a tool that does not exist.

use crate::error::ToolError;
use crate::reply::Reply;
use crate::runs::{self, Progress};
use crate::shared::Shared;
use crate::threads;
use crate::tools::{self, Call};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;

/// One session's handler (all sessions share the server's state).
#[derive(Clone)]
pub(crate) struct Handler {
    shared: Arc<Shared>,
}

impl Handler {
    pub fn new(shared: Arc<Shared>) -> Self {
        Handler { shared }
    }

    async fn call(&self, call: Call, progress: Progress) -> Result<Reply, ToolError> {
        let shared = &self.shared;
        match call {
            Call::Run { graph, input } => runs::start(shared, &graph, input, progress).await,
            Call::Resume { thread, answer } => {
                runs::resume(shared, &thread, answer, progress).await
            }
            Call::Read { thread } => threads::read(shared, &thread).await,
            Call::List => threads::list(shared).await,
        }
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stategraph", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Durable state graphs as tools. `run_<graph>` starts a run on a new thread; a \
                 run that pauses for a person returns its question and thread_id: ask the \
                 person, then call resume_thread with the thread_id and the answer. Threads \
                 keep every finished step, so a run stopped or failed goes on from where it \
                 was with resume_thread. read_thread and list_threads show where threads stand.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list(
            &self.shared.registry,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(parsed) = tools::parse(&self.shared.registry, &request.name, request.arguments)
        else {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{}` (tools/list lists them)", request.name),
                None,
            ));
        };
        let progress = Progress::new(&context);
        let result = match parsed {
            Ok(call) => self.call(call, progress).await,
            Err(e) => Err(e),
        };
        Ok(match result {
            Ok(reply) => reply.into_result(),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.0)]),
        }
        .into())
    }
}
