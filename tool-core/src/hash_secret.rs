//! [`HashSecret`]: the secret that keys request hashes, held by the application outside the
//! store.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The environment variable that holds the secret itself (see [`HashSecret::from_env`]).
pub const HASH_SECRET_ENV: &str = "TOOLGATE_HASH_SECRET";

/// The environment variable that names a file holding the secret (see
/// [`HashSecret::from_env`]).
pub const HASH_SECRET_FILE_ENV: &str = "TOOLGATE_HASH_SECRET_FILE";

/// The secret of [`HashSecret::local_default`]. It is public, so it protects nothing.
const LOCAL_DEFAULT: &[u8] = b"toolgate local default hash secret: public, protects nothing";

/// The secret that keys the request hash of every call (HMAC-SHA-256), so that a hash the store
/// keeps or the command line prints never lets anyone who lacks the secret recover an argument,
/// a `#[sensitive]` one included, by hashing guesses.
///
/// The application holds it outside the store (an environment variable, a file, a secrets
/// manager) and gives it to [`DispatcherBuilder::hash_secret`](crate::dispatch::DispatcherBuilder::hash_secret).
/// Keep it stable: a record stored under another secret no longer matches its replays, which
/// then answer `conflict` until the record expires. It never prints: its `Debug` shows
/// `HashSecret([redacted])`.
///
/// # Examples
///
/// ```
/// use toolgate::idempotency::HashSecret;
///
/// let secret = HashSecret::new("a secret of at least thirty-two bytes, kept out of the store")
///     .unwrap();
/// assert_eq!(format!("{secret:?}"), "HashSecret([redacted])");
/// assert!(HashSecret::new("short").is_err());
/// ```
#[derive(Clone)]
pub struct HashSecret {
    /// HMAC-SHA-256 with the key already absorbed: each hash clones it.
    mac: Hmac<Sha256>,
    local_default: bool,
}

impl HashSecret {
    /// The fewest bytes a secret has: 32, the size of the hash it keys.
    pub const MIN_LEN: usize = 32;

    /// The secret `bytes`.
    ///
    /// # Errors
    ///
    /// [`HashSecretError::TooShort`] when it has fewer than [`HashSecret::MIN_LEN`] bytes.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, HashSecretError> {
        let bytes = bytes.as_ref();
        if bytes.len() < Self::MIN_LEN {
            return Err(HashSecretError::TooShort { len: bytes.len() });
        }
        Ok(Self::keyed(bytes, false))
    }

    /// The secret for local use, when the application gives none: a fixed value written in
    /// toolgate's source, so it protects nothing (anyone can hash guesses with it). A dispatcher
    /// with a store built with it logs a warning, once a process.
    pub fn local_default() -> Self {
        Self::keyed(LOCAL_DEFAULT, true)
    }

    /// Whether this is [`HashSecret::local_default`].
    pub fn is_local_default(&self) -> bool {
        self.local_default
    }

    /// The secret from the environment: the bytes of `TOOLGATE_HASH_SECRET`
    /// ([`HASH_SECRET_ENV`]), or of the file `TOOLGATE_HASH_SECRET_FILE`
    /// ([`HASH_SECRET_FILE_ENV`]) names, without the line breaks that end it; `None` when
    /// neither is set.
    ///
    /// # Errors
    ///
    /// When both are set, the file cannot be read, or the secret is shorter than
    /// [`HashSecret::MIN_LEN`] bytes.
    pub fn from_env() -> Result<Option<Self>, HashSecretError> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// [`HashSecret::from_env`] with the variables read by `var`.
    fn from_lookup(
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<Self>, HashSecretError> {
        match (var(HASH_SECRET_ENV), var(HASH_SECRET_FILE_ENV)) {
            (Some(_), Some(_)) => Err(HashSecretError::Both),
            (Some(value), None) => Self::new(value.into_encoded_bytes()).map(Some),
            (None, Some(path)) => {
                let path = PathBuf::from(path);
                let mut bytes = std::fs::read(&path)
                    .map_err(|source| HashSecretError::Unreadable { path, source })?;
                while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    bytes.pop();
                }
                Self::new(bytes).map(Some)
            }
            (None, None) => Ok(None),
        }
    }

    fn keyed(bytes: &[u8], local_default: bool) -> Self {
        let Ok(mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(bytes) else {
            unreachable!("HMAC takes a key of any length");
        };
        HashSecret { mac, local_default }
    }

    /// The HMAC of `parts`, each length-prefixed (no two part lists hash the same bytes), in
    /// lower-case hex.
    pub(crate) fn hex_hmac(&self, parts: &[&str]) -> String {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        hex(&mac.finalize().into_bytes())
    }

    /// Logs, once a process, that a dispatcher keeps hashes under the local default secret.
    pub(crate) fn warn_if_local_default(&self) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        self.warn_once(&WARNED);
    }

    /// Logs that hashes are kept under the local default secret, if this is it and `warned` was
    /// not set yet; sets it. Answers whether it logged.
    fn warn_once(&self, warned: &AtomicBool) -> bool {
        let warn = self.local_default && !warned.swap(true, Ordering::Relaxed);
        if warn {
            tracing::warn!(
                "toolgate keys request hashes with its public local default secret, so a stored \
                 or printed hash lets anyone recover an argument by guessing: give the dispatcher \
                 a secret with DispatcherBuilder::hash_secret (for example from \
                 {HASH_SECRET_ENV} or {HASH_SECRET_FILE_ENV} with HashSecret::from_env)"
            );
        }
        warn
    }
}

impl std::fmt::Debug for HashSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.local_default {
            f.write_str("HashSecret(local default)")
        } else {
            f.write_str("HashSecret([redacted])")
        }
    }
}

/// Why a [`HashSecret`] could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HashSecretError {
    /// The secret has fewer than [`HashSecret::MIN_LEN`] bytes.
    #[error(
        "the hash secret has {len} bytes, and a shorter secret than {} bytes can be guessed: give at least {} random bytes (for example `openssl rand -hex 32`)",
        HashSecret::MIN_LEN,
        HashSecret::MIN_LEN
    )]
    TooShort {
        /// How many bytes it has.
        len: usize,
    },
    /// Both environment variables are set.
    #[error(
        "both {} and {} are set, and only one may say what the hash secret is: unset one of them",
        HASH_SECRET_ENV,
        HASH_SECRET_FILE_ENV
    )]
    Both,
    /// The file named by the environment cannot be read.
    #[error(
        "the hash secret file {} named by {} cannot be read: {}; check the path and its permissions",
        .path.display(),
        HASH_SECRET_FILE_ENV,
        .source
    )]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
}

/// `bytes` in lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(var, _)| *var == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn a_secret_has_a_minimum_length_and_never_prints() {
        assert!(matches!(
            HashSecret::new(&SECRET[1..]),
            Err(HashSecretError::TooShort { len: 31 })
        ));
        let secret = HashSecret::new(SECRET).unwrap();
        assert_eq!(format!("{secret:?}"), "HashSecret([redacted])");
        assert!(!secret.is_local_default());
        assert!(HashSecret::local_default().is_local_default());
    }

    #[test]
    fn only_the_local_default_warns_and_only_once() {
        let warned = AtomicBool::new(false);
        assert!(!HashSecret::new(SECRET).unwrap().warn_once(&warned));
        assert!(HashSecret::local_default().warn_once(&warned));
        assert!(!HashSecret::local_default().warn_once(&warned));
    }

    #[test]
    fn the_secret_keys_the_hash() {
        let a = HashSecret::new(SECRET).unwrap();
        let b = HashSecret::new(SECRET.to_uppercase()).unwrap();
        assert_eq!(a.hex_hmac(&["x", "y"]), a.hex_hmac(&["x", "y"]));
        assert_ne!(a.hex_hmac(&["x", "y"]), b.hex_hmac(&["x", "y"]));
        assert_ne!(a.hex_hmac(&["xy"]), a.hex_hmac(&["x", "y"]));
        assert_eq!(a.hex_hmac(&["x"]).len(), 64);
    }

    #[test]
    fn the_environment_gives_the_secret_or_the_file_naming_it() {
        let dir = std::env::temp_dir().join(format!("toolgate-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, format!("{SECRET}\n")).unwrap();
        let file = file.to_str().unwrap();
        let from = |vars: &[(&str, &str)]| HashSecret::from_lookup(lookup(vars));
        let direct = from(&[(HASH_SECRET_ENV, SECRET)]).unwrap().unwrap();
        let filed = from(&[(HASH_SECRET_FILE_ENV, file)]).unwrap().unwrap();
        assert_eq!(
            direct.hex_hmac(&["x"]),
            filed.hex_hmac(&["x"]),
            "the file's final line break is not part of the secret"
        );
        assert!(from(&[]).unwrap().is_none());
        assert!(matches!(
            from(&[(HASH_SECRET_ENV, SECRET), (HASH_SECRET_FILE_ENV, file)]),
            Err(HashSecretError::Both)
        ));
        assert!(matches!(
            from(&[(HASH_SECRET_ENV, "short")]),
            Err(HashSecretError::TooShort { len: 5 })
        ));
        let missing = dir.join("missing");
        assert!(matches!(
            from(&[(HASH_SECRET_FILE_ENV, missing.to_str().unwrap())]),
            Err(HashSecretError::Unreadable { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
