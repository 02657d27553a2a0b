use std::sync::Arc;

use crate::Membership;
use crate::proposer::Candidate;
use crate::proposer::Leader;
use crate::type_config::alias::NodeIdOf;
use crate::type_config::alias::NodeOf;

/// The quorum set type used by `Leader`.
pub(crate) type LeaderQuorumSet<C> = Arc<Membership<NodeIdOf<C>, NodeOf<C>>>;

pub(crate) type LeaderState<C> = Option<Box<Leader<C, LeaderQuorumSet<C>>>>;
// ramqp: boxed; two of these (a candidate and a pre-candidate) were 384 bytes
// of every group's engine, for the few moments it campaigns.
pub(crate) type CandidateState<C> = Option<Box<Candidate<C, LeaderQuorumSet<C>>>>;
