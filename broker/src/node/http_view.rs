//! The node as the HTTP endpoint (`crate::http`) sees it: the parts of the
//! assembly it may read (transient queues, the fatal fault, whether the
//! node stops, failed logins, the fabric) and the policy set it may
//! replace, behind the endpoint's
//! [`NodeView`] trait, and starting the endpoint's listener.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::fabric::FabricTransport;
use super::fatal::FatalWatch;
use super::policies::NodePolicies;
use super::registry::Registry;
use crate::auth::Authenticator;
use crate::config::PolicyConfig;
use crate::http::{FabricView, NodeView, Sources};
use crate::queue::{PolicyError, QueueStats};
use crate::tls::TlsServer;

/// What the endpoint reads of the node.
pub(super) struct HttpView {
    pub(super) registry: Arc<Registry>,
    pub(super) fatal: FatalWatch,
    pub(super) stopping: watch::Receiver<bool>,
    pub(super) auth: Arc<Authenticator>,
    pub(super) fabric: Option<Arc<FabricTransport>>,
    pub(super) policies: Arc<NodePolicies>,
}

impl NodeView for HttpView {
    fn transient_queues(&self) -> Vec<QueueStats> {
        self.registry.transient_stats()
    }

    fn fatal(&self) -> Option<String> {
        self.fatal.current().map(|fault| fault.to_string())
    }

    fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    fn login_failures(&self) -> u64 {
        self.auth.throttle().failures_total()
    }

    fn policies(&self) -> Vec<PolicyConfig> {
        self.policies.current()
    }

    fn set_policies(&self, policies: &[PolicyConfig]) -> Result<usize, PolicyError> {
        self.policies.replace(policies)
    }

    fn fabric(&self) -> Option<FabricView> {
        let fabric = self.fabric.as_ref()?;
        Some(FabricView {
            stats: fabric.stats(),
            peers: fabric
                .peers()
                .into_iter()
                .map(|(id, _, up)| (id, up))
                .collect(),
        })
    }
}

/// Serve the endpoint on `listener` in a task of its own: aborted by
/// `Broker::shutdown` once everything else has stopped, or ending when
/// the broker is dropped (the sender of `stopping` with it).
/// With `tls`, the endpoint serves HTTPS with the AMQP listener's
/// certificate (reloaded with it).
pub(super) fn start(
    listener: TcpListener,
    sources: Sources,
    tls: Option<Arc<TlsServer>>,
    stopping: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(crate::http::serve(
        listener,
        Arc::new(sources),
        tls,
        stopping,
    ))
}
