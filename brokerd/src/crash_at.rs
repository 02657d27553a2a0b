//! `RAMQP_CRASH_AT=<point>`: the crash tests' switch. Arms the library's
//! named crash point (`broker::crash_point`) with an action that sends
//! this process SIGKILL, so the files are left exactly as they are at that
//! step. Not a configuration option: it exists for tests, is read from the
//! environment only, and is logged loudly when set.

use rustix::process::{getpid, kill_process, Signal};

/// The environment variable naming the crash point.
pub const VAR: &str = "RAMQP_CRASH_AT";

/// Arms the point named by [`VAR`], if set; an unknown name is an error.
pub fn arm_from_env() -> Result<Option<String>, broker::crash_point::ArmError> {
    let Some(name) = std::env::var_os(VAR) else {
        return Ok(None);
    };
    let name = name.to_string_lossy().into_owned();
    broker::crash_point::arm(&name, kill_self)?;
    Ok(Some(name))
}

fn kill_self(point: &'static str) {
    // eprintln is unbuffered: the line is out before the signal.
    eprintln!("ramqp-brokerd: crash point {point} reached; SIGKILL");
    let _ = kill_process(getpid(), Signal::KILL);
    // SIGKILL cannot be caught; this thread must not go on meanwhile.
    loop {
        std::thread::park();
    }
}
