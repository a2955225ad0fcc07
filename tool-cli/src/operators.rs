//! `operators init | issue | list`: the issuers of operator tokens. An issuer's secret key lives
//! in a file only its holder reads; the store holds its public key, against which every command
//! that acts checks the operator's token ([`sign_in`](crate::sign_in::sign_in)).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use serde_json::{Value, json};
use toolgate_core::identity::{IssuerSecret, identifier_flaw};
use toolgate_core::store::OperationStore;

use crate::args::{InitArgs, IssueArgs};
use crate::error::Failure;
use crate::json::document;
use crate::table::Table;
use crate::time::now_ms;

/// `operators init`, before the store is opened: the names checked, the secret file's path
/// found free, and the key pair made. Nothing is written.
pub(crate) fn prepare(args: &InitArgs) -> Result<IssuerSecret, Failure> {
    for (flag, name) in [("--issuer", &args.issuer), ("--tenant", &args.tenant)] {
        if let Some(flaw) = identifier_flaw(name) {
            return Err(Failure::usage(
                format!("the {flag} {name:?} is not an identifier"),
                format!(
                    "{flaw}; the issuer's name and tenant are written in every token it signs, and compared exactly"
                ),
                format!("give {flag} a name with no space, control or invisible character"),
            ));
        }
    }
    if args.secret_file.symlink_metadata().is_ok() {
        return Err(exists(&args.secret_file));
    }
    IssuerSecret::generate(&args.issuer, &args.tenant).map_err(|err| {
        Failure::refused(
            "could not make an issuer key",
            err.to_string(),
            "run the command again",
        )
    })
}

/// `operators init`: writes `secret` to the new secret file, then adds its public key to
/// `store`; the file is removed again when the store does not take the key.
pub(crate) async fn init(
    store: &dyn OperationStore,
    args: &InitArgs,
    secret: &IssuerSecret,
) -> Result<String, Failure> {
    let path = args.secret_file.as_path();
    write_secret(path, &secret.to_jwk())?;
    let key = secret.public();
    let kid = key.kid();
    let refusal = match store.add_issuer_key(&key, now_ms()).await {
        Ok(true) => None,
        Ok(false) => Some(Failure::refused(
            "could not add the issuer's public key",
            format!("the store holds a key of id {kid} already"),
            "run the command again: a new key pair has another id",
        )),
        Err(e) => Some(Failure::store("add the issuer's public key", &e)),
    };
    if let Some(mut failure) = refusal {
        let (Failure::Usage(e) | Failure::Refused(e) | Failure::Store(e)) = &mut failure;
        match std::fs::remove_file(path) {
            Ok(()) => e.why.push_str(&format!(
                "; the secret file {} was removed",
                path.display()
            )),
            Err(err) => e.why.push_str(&format!(
                "; the secret file {} could not be removed ({err}): remove it before running the command again",
                path.display()
            )),
        }
        return Err(failure);
    }
    let shown = path.display();
    Ok(format!(
        "issuer {} of tenant {}: its public key is in the store, key id {kid}\n\
         its secret key is in {shown}, readable by you alone: keep it there, and give it to no one\n\
         next: toolgate operators issue --secret-file {shown} --subject SUBJECT --permission PERMISSION\n",
        key.issuer, key.tenant
    ))
}

/// The refusal to write the secret key over the file at `path`.
fn exists(path: &Path) -> Failure {
    let shown = path.display();
    Failure::refused(
        format!("the secret file {shown} exists"),
        "a file is never overwritten: a secret key written over is lost for good",
        format!(
            "give --secret-file a path where no file is; if {shown} is this issuer's key already, issue with it: `toolgate operators issue --secret-file {shown} …`"
        ),
    )
}

/// Writes `jwk` to the new file `path`, of mode 0600 on Unix; nothing is left behind when it
/// fails.
fn write_secret(path: &Path, jwk: &str) -> Result<(), Failure> {
    let shown = path.display();
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == ErrorKind::AlreadyExists {
            return exists(path);
        }
        Failure::usage(
            format!("could not create the secret file {shown}"),
            e.to_string(),
            "give --secret-file a new file's path in a directory that exists and you may write to",
        )
    })?;
    let written = file
        .write_all(jwk.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(Failure::usage(
            format!("could not write the secret file {shown}"),
            format!("{e}; the file was removed"),
            "give --secret-file a path on a disk with room, and run the command again",
        ));
    }
    Ok(())
}

/// `operators issue`: a token for the subject, signed with the secret key in the file, printed
/// alone. No store is opened.
pub(crate) fn issue(args: &IssueArgs) -> Result<String, Failure> {
    let secret = read_secret(&args.secret_file)?;
    let permissions: Vec<&str> = args.permissions.iter().map(String::as_str).collect();
    let token = secret
        .issue(&args.subject, &permissions, args.lifetime, now_ms())
        .map_err(|err| {
            Failure::usage(
                "could not issue a token",
                err.to_string(),
                "give --subject and each --permission with no space, control or invisible character",
            )
        })?;
    Ok(format!("{token}\n"))
}

/// The issuer's secret key in the file at `path`, refused when group or others may read or
/// write the file.
fn read_secret(path: &Path) -> Result<IssuerSecret, Failure> {
    let shown = path.display();
    let unread = |e: std::io::Error| {
        Failure::usage(
            format!("could not read the secret file {shown}"),
            e.to_string(),
            "give --secret-file the file `toolgate operators init` wrote",
        )
    };
    let mut file = File::open(path).map_err(unread)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata().map_err(unread)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Failure::refused(
                format!("the secret file {shown} is open to others (mode {mode:04o})"),
                "an issuer's secret key signs tokens for any operator of its tenant: group and others must not read or write it",
                format!("chmod 600 {shown}, then run the command again"),
            ));
        }
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(unread)?;
    IssuerSecret::from_jwk(&text).map_err(|err| {
        Failure::usage(
            format!("the file {shown} is not an issuer's secret key"),
            err.to_string(),
            "give --secret-file the file `toolgate operators init` wrote",
        )
    })
}

/// `operators list --tenant TENANT`: the issuer keys the store holds for `tenant`, in the order
/// they were added.
pub(crate) async fn list(
    store: &dyn OperationStore,
    tenant: &str,
    json: bool,
) -> Result<String, Failure> {
    let keys = store
        .issuer_keys(tenant)
        .await
        .map_err(|e| Failure::store(&format!("read the issuer keys of tenant {tenant}"), &e))?;
    if json {
        return Ok(document(&Value::Array(
            keys.iter()
                .map(|key| {
                    let jwk: Value = serde_json::from_str(&key.to_jwk()).unwrap_or(Value::Null);
                    json!({"kid": key.kid(), "issuer": key.issuer, "tenant": key.tenant, "jwk": jwk})
                })
                .collect(),
        )));
    }
    if keys.is_empty() {
        return Ok(format!("no issuer keys of tenant {tenant}\n"));
    }
    let mut table = Table::new(&["KID", "ISSUER"]);
    for key in &keys {
        table.row(vec![key.kid(), key.issuer.clone()]);
    }
    Ok(table.render())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use toolgate_core::store::IssuerKeyStore;
    use toolgate_test::{ControlledStore, Fault, MemoryStore, Request};

    use super::*;

    fn args(dir: &Path) -> InitArgs {
        InitArgs {
            issuer: "acme-ops".into(),
            tenant: "acme".into(),
            secret_file: dir.join("acme-ops.jwk"),
        }
    }

    #[tokio::test]
    async fn the_secret_file_is_removed_when_the_store_does_not_take_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let args = args(dir.path());
        let store = ControlledStore::new(Arc::new(MemoryStore::new()));
        store.fail_next(Request::AddIssuerKey, 1, Fault::Refused);
        let secret = prepare(&args).unwrap();
        let failure = init(&store, &args, &secret).await.unwrap_err();
        assert_eq!(failure.exit_code(), 3);
        let text = failure.to_string();
        assert!(
            text.contains("could not add the issuer's public key"),
            "{text}"
        );
        assert!(text.contains("was removed"), "{text}");
        assert!(!args.secret_file.exists());
        assert!(store.issuer_keys("acme").await.unwrap().is_empty());

        // Taken, the key is in the store and the secret in the file.
        let secret = prepare(&args).unwrap();
        let made = init(&store, &args, &secret).await.unwrap();
        assert!(made.contains(&secret.public().kid()), "{made}");
        assert_eq!(store.issuer_keys("acme").await.unwrap(), [secret.public()]);
        let written = std::fs::read_to_string(&args.secret_file).unwrap();
        assert_eq!(
            IssuerSecret::from_jwk(&written).unwrap().public(),
            secret.public()
        );
        // Never twice into the same file.
        assert_eq!(prepare(&args).unwrap_err().exit_code(), 1);
        let again = init(&store, &args, &secret).await.unwrap_err();
        assert!(again.to_string().contains("exists"), "{again}");
        assert_eq!(std::fs::read_to_string(&args.secret_file).unwrap(), written);
    }
}
