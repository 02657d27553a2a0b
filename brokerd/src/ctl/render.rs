//! Plain-text tables of a node's status for `ramqp-ctl status`.

use std::fmt::Write;

use broker::admin::NodeStatus;

/// Members, then queues, as aligned columns.
pub fn status(status: &NodeStatus) -> String {
    let mut out = String::new();
    let leader = status
        .metadata_leader
        .map_or_else(|| "none".to_owned(), |id| id.to_string());
    let _ = writeln!(
        out,
        "node {} (amqp {}), metadata leader: {leader}",
        status.node_id, status.amqp
    );
    let _ = writeln!(out, "\nMEMBER  FABRIC                 REACHABLE");
    for member in &status.members {
        let _ = writeln!(
            out,
            "{:<7} {:<22} {}",
            member.id,
            member.fabric,
            if member.reachable { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(
        out,
        "\n{:<32} {:<7} {:<10} {:>9} {:>10} {:>9} {:>9}",
        "QUEUE", "LEADER", "MEMBERS", "READY", "UNSETTLED", "CONSUMERS", "APPLIED"
    );
    for queue in &status.queues {
        let members: Vec<String> = queue.members.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "{:<32} {:<7} {:<10} {:>9} {:>10} {:>9} {:>9}",
            queue.address,
            queue.leader.map_or_else(|| "-".into(), |l| l.to_string()),
            members.join(","),
            queue.ready,
            queue.unsettled,
            queue.consumers,
            queue
                .applied_index
                .map_or_else(|| "-".into(), |i| i.to_string()),
        );
    }
    out
}
