//! Who may connect and what they may do: the credentials SASL checks
//! (the users file's salted SCRAM-SHA-256 credentials, plus the
//! deprecated plaintext `[sasl] users`, hashed at start-up), the
//! permissions a login grants, and the throttle that slows failed logins.
//!
//! The engine asks this module; this module knows nothing of frames,
//! sessions or queues (it sits below the engine, beside `net` and
//! `queue`). The users file is re-read on [`Authenticator::reload`]
//! (SIGHUP in `ramqp-brokerd`); a connection keeps the permissions it
//! logged in with.

pub mod login_throttle;
pub mod permissions;
pub mod scram;
pub mod users_file;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

pub use login_throttle::LoginThrottle;
pub use permissions::{Access, Permissions};
pub use scram::{ScramCredential, ScramServer};
pub use users_file::{UserEntry, UserRecord, UsersFile, UsersFileError, ADMINISTRATOR_TAG};

use crate::config::SaslConfig;

/// The users-file entry whose permissions anonymous connections get when a
/// users file is in force (and anonymous is enabled explicitly).
pub const ANONYMOUS_USER: &str = "anonymous";

/// Why authentication could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The users file is unusable.
    #[error(transparent)]
    UsersFile(#[from] UsersFileError),
    /// The plaintext `[sasl] users` are wrong (e.g. a name twice).
    #[error("sasl.users: {0}")]
    ConfigUsers(String),
}

/// Credentials, grants and the login throttle of one broker.
#[derive(Debug)]
pub struct Authenticator {
    anonymous: bool,
    users_file: Option<PathBuf>,
    /// From `[sasl] users`: deprecated plaintext, hashed here at start so
    /// that PLAIN and SCRAM check one kind of credential. All permissions.
    config_users: HashMap<String, Arc<UserEntry>>,
    file_users: RwLock<Arc<HashMap<String, Arc<UserEntry>>>>,
    /// Keys the decoy credentials of unknown names.
    secret: Vec<u8>,
    throttle: LoginThrottle,
}

fn load_users(path: &std::path::Path) -> Result<HashMap<String, Arc<UserEntry>>, AuthError> {
    let file = UsersFile::load(path)?;
    let users = file.compile().map_err(|message| UsersFileError::Invalid {
        path: path.display().to_string(),
        message,
    })?;
    Ok(users
        .into_iter()
        .map(|(name, entry)| (name, Arc::new(entry)))
        .collect())
}

impl Authenticator {
    /// Read the users file (if any) and hash the plaintext users.
    pub fn from_config(config: &SaslConfig) -> Result<Authenticator, AuthError> {
        let mut config_users = HashMap::new();
        for user in &config.users {
            let entry = UserEntry {
                name: user.username.clone(),
                credential: ScramCredential::new(&user.password),
                permissions: Permissions::all(),
                // They may do everything over AMQP already.
                administrator: true,
            };
            if config_users
                .insert(user.username.clone(), Arc::new(entry))
                .is_some()
            {
                return Err(AuthError::ConfigUsers(format!(
                    "user {:?} appears twice",
                    user.username
                )));
            }
        }
        let file_users = match &config.users_file {
            Some(path) => load_users(path)?,
            None => HashMap::new(),
        };
        Ok(Authenticator {
            anonymous: config.anonymous_allowed(),
            users_file: config.users_file.clone(),
            config_users,
            file_users: RwLock::new(Arc::new(file_users)),
            secret: scram::random_bytes(32),
            throttle: LoginThrottle::default(),
        })
    }

    /// Re-read the users file; the number of users in it. On an error the
    /// users read before stay in force.
    pub fn reload(&self) -> Result<usize, AuthError> {
        let Some(path) = &self.users_file else {
            return Ok(0);
        };
        let users = load_users(path)?;
        let count = users.len();
        *self.file_users.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(users);
        Ok(count)
    }

    /// Whether ANONYMOUS (and skipping SASL) is accepted.
    pub fn anonymous_allowed(&self) -> bool {
        self.anonymous
    }

    /// Whether PLAIN and SCRAM-SHA-256 are offered: a users file is in
    /// force or plaintext users are configured.
    pub fn has_credentials(&self) -> bool {
        self.users_file.is_some() || !self.config_users.is_empty()
    }

    fn file_users(&self) -> Arc<HashMap<String, Arc<UserEntry>>> {
        self.file_users
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The user `name`: the users file's entry, else a plaintext one.
    pub fn user(&self, name: &str) -> Option<Arc<UserEntry>> {
        self.file_users()
            .get(name)
            .cloned()
            .or_else(|| self.config_users.get(name).cloned())
    }

    /// The credential to run SCRAM with for `name`: the user's, or a
    /// decoy that fails the same way for a name that does not exist.
    pub fn scram_credential(&self, name: &str) -> ScramCredential {
        match self.user(name) {
            Some(user) => user.credential.clone(),
            None => scram::decoy_credential(&self.secret, name),
        }
    }

    /// Check a PLAIN login; the user's permissions if it is right. An
    /// unknown name costs the same PBKDF2 work as a wrong password.
    pub fn check_plain(&self, name: &str, password: &[u8]) -> Option<Permissions> {
        self.check_password(name, password)
            .map(|user| user.permissions.clone())
    }

    /// Check a name and password (SASL PLAIN, HTTP basic auth) against the
    /// stored credential: PBKDF2 with its salt and iterations, compared in
    /// constant time. The user on success; an unknown name costs the same
    /// work as a wrong password.
    pub fn check_password(&self, name: &str, password: &[u8]) -> Option<Arc<UserEntry>> {
        match self.user(name) {
            Some(user) => user.credential.verify_password(password).then_some(user),
            None => {
                let _ = scram::decoy_credential(&self.secret, name).verify_password(password);
                None
            }
        }
    }

    /// What an authenticated user may do (`None`: the user is gone).
    pub fn grant(&self, name: &str) -> Option<Permissions> {
        self.user(name).map(|user| user.permissions.clone())
    }

    /// What an anonymous connection may do: everything without a users
    /// file (the broker authorizes nothing then), else the permissions of
    /// the file's user [`ANONYMOUS_USER`], or nothing at all.
    pub fn anonymous_grant(&self) -> Permissions {
        if self.users_file.is_none() {
            return Permissions::all();
        }
        self.file_users()
            .get(ANONYMOUS_USER)
            .map_or_else(Permissions::none, |user| user.permissions.clone())
    }

    /// SASL EXTERNAL with a verified client certificate whose subject CN is
    /// `name`: without a users file every certificate of the client CA is
    /// trusted with everything; with one, the CN must be a user of it.
    pub fn external_grant(&self, name: &str) -> Option<Permissions> {
        if self.users_file.is_none() {
            return Some(Permissions::all());
        }
        self.file_users()
            .get(name)
            .map(|user| user.permissions.clone())
    }

    /// Failed logins and their delays.
    pub fn throttle(&self) -> &LoginThrottle {
        &self.throttle
    }
}
