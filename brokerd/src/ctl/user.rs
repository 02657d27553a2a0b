//! `ramqp-ctl user add|delete|list --file FILE`: edit a users file
//! offline. The password is turned into a salted SCRAM-SHA-256 credential
//! here and never written; the broker reads the file at start and on
//! SIGHUP. Needs no running node.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use broker::auth::{Permissions, UserRecord, UsersFile};
use clap::Subcommand;

/// What `ramqp-ctl user` can do.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user, or replace the one of that name (new password, new
    /// permissions). Creates the file if missing (mode 0600).
    Add {
        /// The users file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Login name.
        #[arg(long)]
        name: String,
        /// Password (or set RAMQP_CTL_PASSWORD, which keeps it out of the
        /// shell history and `ps`).
        #[arg(long, env = "RAMQP_CTL_PASSWORD", hide_env_values = true)]
        password: String,
        /// Regex of the addresses the user may create queues at ("" none).
        #[arg(long, value_name = "RE", default_value = "")]
        configure: String,
        /// Regex of the addresses the user may publish to.
        #[arg(long, value_name = "RE", default_value = "")]
        write: String,
        /// Regex of the addresses the user may consume from.
        #[arg(long, value_name = "RE", default_value = "")]
        read: String,
        /// Tags, comma-separated: `administrator` lets the user list and
        /// close connections, see the nodes and move leadership through
        /// the HTTP management API.
        #[arg(long, value_name = "TAG,...", value_delimiter = ',')]
        tags: Vec<String>,
    },
    /// Remove a user.
    Delete {
        /// The users file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Login name.
        #[arg(long)]
        name: String,
    },
    /// List the users and their permissions (never a credential).
    List {
        /// The users file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
}

fn load_or_empty(path: &Path) -> anyhow::Result<UsersFile> {
    if path.exists() {
        Ok(UsersFile::load(path)?)
    } else {
        Ok(UsersFile::default())
    }
}

/// Run one `user` command; what to print.
pub fn run(command: UserCommand) -> anyhow::Result<String> {
    match command {
        UserCommand::Add {
            file,
            name,
            password,
            configure,
            write,
            read,
            tags,
        } => {
            if name.is_empty() {
                bail!("the user name is empty");
            }
            let tags: Vec<String> = tags
                .into_iter()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
            if let Some(bad) = tags.iter().find(|t| !valid_tag(t)) {
                bail!("tag {bad:?}: letters, digits, '-' and '_' only");
            }
            Permissions::new(&configure, &write, &read).map_err(anyhow::Error::msg)?;
            let mut users = load_or_empty(&file)?;
            let replaced = users.users.iter().any(|u| u.name == name);
            users.upsert(
                UserRecord::new(&name, &password, &configure, &write, &read).with_tags(tags),
            );
            users.save(&file)?;
            let verb = if replaced { "updated" } else { "added" };
            Ok(format!(
                "user {name} {verb} in {} (send SIGHUP to the broker to apply)",
                file.display()
            ))
        }
        UserCommand::Delete { file, name } => {
            let mut users = UsersFile::load(&file)?;
            if !users.remove(&name) {
                bail!("no user {name} in {}", file.display());
            }
            users
                .save(&file)
                .with_context(|| format!("writing {}", file.display()))?;
            Ok(format!(
                "user {name} deleted from {} (send SIGHUP to the broker to apply)",
                file.display()
            ))
        }
        UserCommand::List { file } => {
            let users = UsersFile::load(&file)?;
            let mut out = format!(
                "{:<20} {:<24} {:<24} {:<24} {}\n",
                "NAME", "CONFIGURE", "WRITE", "READ", "TAGS"
            );
            for user in &users.users {
                out.push_str(&format!(
                    "{:<20} {:<24} {:<24} {:<24} {}\n",
                    user.name,
                    shown(&user.configure),
                    shown(&user.write),
                    shown(&user.read),
                    if user.tags.is_empty() {
                        "(none)".to_owned()
                    } else {
                        user.tags.join(",")
                    }
                ));
            }
            Ok(out.trim_end().to_owned())
        }
    }
}

/// A tag is a plain word (it is written into the file and shown in lists).
fn valid_tag(tag: &str) -> bool {
    tag.len() <= 64
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// An empty pattern shown as what it means.
fn shown(pattern: &str) -> String {
    if pattern.is_empty() {
        "(none)".into()
    } else {
        format!("{pattern:?}")
    }
}
