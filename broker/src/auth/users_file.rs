//! The users file (`--users FILE`): one `[[user]]` table per user with its
//! salted SCRAM-SHA-256 credential and its three permission patterns.
//! Never a password: `ramqp-ctl user add` derives the credential.
//!
//! ```toml
//! [[user]]
//! name = "app"
//! scram_sha256 = "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>"
//! configure = "^/queues/app-"
//! write = "^/queues/app-"
//! read = "^/queues/app-"
//! tags = ["administrator"]   # optional; see below
//! ```
//!
//! `tags` (optional, empty when absent, so files written before it load
//! as they are) name roles beyond the three patterns; the one the broker
//! knows is [`ADMINISTRATOR_TAG`]: the HTTP management API's connections,
//! nodes and leadership moves. Unknown tags are kept and ignored.
//!
//! Owns reading, checking and (atomically, mode 0600) writing that file;
//! knows nothing of connections.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::permissions::Permissions;
use super::scram::ScramCredential;

/// The tag that lets a user manage the node through the HTTP API
/// (connections, nodes, moving leadership), as RabbitMQ's.
pub const ADMINISTRATOR_TAG: &str = "administrator";

/// Largest users file read (a user is a few hundred bytes).
const FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Why a users file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UsersFileError {
    /// It could not be read or written.
    #[error("users file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Its content is wrong (syntax, a credential, a pattern, a duplicate).
    #[error("users file {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, naming the user.
        message: String,
    },
}

/// One user as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserRecord {
    /// Login name.
    pub name: String,
    /// [`ScramCredential::encode`]'s form.
    pub scram_sha256: String,
    /// Addresses the user may create queues at (regex; "" is none).
    #[serde(default)]
    pub configure: String,
    /// Addresses the user may publish to.
    #[serde(default)]
    pub write: String,
    /// Addresses the user may consume from.
    #[serde(default)]
    pub read: String,
    /// Roles beyond the patterns, e.g. [`ADMINISTRATOR_TAG`]; not written
    /// when empty, so such a file reads as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsersFile {
    /// The users, in file order.
    #[serde(default, rename = "user")]
    pub users: Vec<UserRecord>,
}

/// A user ready for logins: credential decoded, patterns compiled.
#[derive(Debug, Clone)]
pub struct UserEntry {
    /// Login name.
    pub name: String,
    /// What PLAIN and SCRAM check.
    pub credential: ScramCredential,
    /// What the user may do.
    pub permissions: Permissions,
    /// Whether the user has the [`ADMINISTRATOR_TAG`].
    pub administrator: bool,
}

impl UsersFile {
    /// Read `path`; a missing file is an error (a typo must not mean "no
    /// users").
    pub fn load(path: &Path) -> Result<UsersFile, UsersFileError> {
        let shown = path.display().to_string();
        let io = |source| UsersFileError::Io {
            path: shown.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > FILE_MAX_BYTES {
            return Err(UsersFileError::Invalid {
                path: shown,
                message: format!("larger than {FILE_MAX_BYTES} bytes"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Self::parse(&text).map_err(|message| UsersFileError::Invalid {
            path: shown,
            message,
        })
    }

    /// Parse the file's text.
    pub fn parse(text: &str) -> Result<UsersFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Check every user and compile them, by name.
    pub fn compile(&self) -> Result<HashMap<String, UserEntry>, String> {
        let mut users = HashMap::with_capacity(self.users.len());
        for record in &self.users {
            let entry = record.compile()?;
            if users.insert(record.name.clone(), entry).is_some() {
                return Err(format!("user {:?} appears twice", record.name));
            }
        }
        Ok(users)
    }

    /// Add `record`, replacing a user of the same name.
    pub fn upsert(&mut self, record: UserRecord) {
        match self.users.iter_mut().find(|u| u.name == record.name) {
            Some(existing) => *existing = record,
            None => self.users.push(record),
        }
    }

    /// Remove the user `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.users.len();
        self.users.retain(|u| u.name != name);
        self.users.len() != before
    }

    /// Write the file atomically (a temporary file in the same directory,
    /// fsynced, renamed over it), readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), UsersFileError> {
        let shown = path.display().to_string();
        let io = |source| UsersFileError::Io {
            path: shown.clone(),
            source,
        };
        let text = toml::to_string(self).map_err(|e| UsersFileError::Invalid {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "users".into());
        let temp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
        let written = (|| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&temp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, path)?;
            std::fs::File::open(dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written.map_err(io)
    }
}

impl UserRecord {
    /// A record for `name` with a fresh credential of `password`.
    pub fn new(name: &str, password: &str, configure: &str, write: &str, read: &str) -> UserRecord {
        UserRecord {
            name: name.to_owned(),
            scram_sha256: ScramCredential::new(password).encode(),
            configure: configure.to_owned(),
            write: write.to_owned(),
            read: read.to_owned(),
            tags: Vec::new(),
        }
    }

    /// The same record with `tags`.
    pub fn with_tags(mut self, tags: Vec<String>) -> UserRecord {
        self.tags = tags;
        self
    }

    /// Decode and compile; the error names the user.
    pub fn compile(&self) -> Result<UserEntry, String> {
        if self.name.is_empty() {
            return Err("a user has an empty name".into());
        }
        let credential = ScramCredential::decode(&self.scram_sha256)
            .map_err(|e| format!("user {:?}: {e}", self.name))?;
        let permissions = Permissions::new(&self.configure, &self.write, &self.read)
            .map_err(|e| format!("user {:?}: {e}", self.name))?;
        Ok(UserEntry {
            name: self.name.clone(),
            credential,
            permissions,
            administrator: self.tags.iter().any(|t| t == ADMINISTRATOR_TAG),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::permissions::Access;
    use super::*;

    #[test]
    fn save_load_round_trip_keeps_no_password() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.toml");
        let mut file = UsersFile::default();
        file.upsert(UserRecord::new("app", "hunter2", "", "^/queues/a$", ".*"));
        file.upsert(UserRecord::new("ops", "pw", ".*", ".*", ".*"));
        file.upsert(UserRecord::new("app", "hunter3", "", "^/queues/b$", ""));
        file.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter"), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let loaded = UsersFile::load(&path).unwrap();
        assert_eq!(loaded, file);
        let users = loaded.compile().unwrap();
        assert_eq!(users.len(), 2);
        let app = &users["app"];
        assert!(app.credential.verify_password(b"hunter3"));
        assert!(!app.credential.verify_password(b"hunter2"));
        assert!(app.permissions.allows(Access::Write, "/queues/b"));
        assert!(!app.permissions.allows(Access::Write, "/queues/a"));
        assert!(!app.permissions.allows(Access::Read, "/queues/b"));
        assert!(!app.administrator);
        let mut loaded = loaded;
        assert!(loaded.remove("ops"));
        assert!(!loaded.remove("ops"));
    }

    #[test]
    fn tags_are_optional_and_administrator_is_known() {
        let old = "[[user]]\nname = \"app\"\nscram_sha256 = \"CRED\"\nread = \".*\"\n";
        let credential = ScramCredential::new("pw").encode();
        let old = old.replace("CRED", &credential);
        let file = UsersFile::parse(&old).unwrap();
        assert!(file.users[0].tags.is_empty());
        assert!(!file.compile().unwrap()["app"].administrator);
        // Written without the key while empty, so older brokers read it.
        assert!(!toml::to_string(&file).unwrap().contains("tags"));
        let admin = UserRecord::new("ops", "pw", "", "", "")
            .with_tags(vec!["monitoring".into(), ADMINISTRATOR_TAG.into()]);
        let file = UsersFile { users: vec![admin] };
        let text = toml::to_string(&file).unwrap();
        let back = UsersFile::parse(&text).unwrap();
        assert_eq!(back, file);
        assert!(back.compile().unwrap()["ops"].administrator);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let good = UserRecord::new("app", "pw", "", "", "");
        let dup = UsersFile {
            users: vec![good.clone(), good.clone()],
        };
        assert!(dup.compile().unwrap_err().contains("twice"));
        let bad_pattern = UsersFile {
            users: vec![UserRecord {
                read: "(".into(),
                ..good.clone()
            }],
        };
        assert!(bad_pattern.compile().unwrap_err().contains("read pattern"));
        let plaintext = UsersFile {
            users: vec![UserRecord {
                scram_sha256: "hunter2".into(),
                ..good
            }],
        };
        assert!(plaintext.compile().unwrap_err().contains("SCRAM"));
        assert!(UsersFile::parse("[[user]]\nname = \"x\"\npassword = \"p\"\n").is_err());
        let missing = UsersFile::load(Path::new("/nonexistent/users.toml"));
        assert!(matches!(missing, Err(UsersFileError::Io { .. })));
    }
}
