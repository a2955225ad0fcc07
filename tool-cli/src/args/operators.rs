//! The `operators` commands: `init`, `issue` and `list`, and the lifetime of a token.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

/// `operators …`.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub(crate) enum Operators {
    /// Make an issuer of operator tokens for a tenant: its secret key into a new file of yours,
    /// its public key into the store
    #[command(after_help = INIT_HELP)]
    Init(InitArgs),
    /// Issue an operator token with an issuer's secret key, printed alone on stdout (needs no
    /// store)
    #[command(after_help = ISSUE_HELP)]
    Issue(IssueArgs),
    /// List the issuer keys the store holds for a tenant: whose tokens it accepts
    List(ListKeys),
}

/// `operators init --issuer NAME --tenant TENANT --secret-file PATH`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct InitArgs {
    /// The issuer's name, the `iss` of the tokens it signs (an identifier: no space, control or
    /// invisible character)
    #[arg(long, value_name = "NAME")]
    pub(crate) issuer: String,
    /// The tenant its tokens act in (an identifier)
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: String,
    /// Where to write the secret key: a new file, readable by you alone (an existing file is
    /// never overwritten)
    #[arg(long = "secret-file", value_name = "PATH")]
    pub(crate) secret_file: PathBuf,
}

/// `operators issue --secret-file PATH --subject SUBJECT --permission P… [--lifetime DURATION]`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct IssueArgs {
    /// The issuer's secret key, the file `operators init` wrote (readable by you alone)
    #[arg(long = "secret-file", value_name = "PATH")]
    pub(crate) secret_file: PathBuf,
    /// Whom the token is for: the name recorded with what they decide or do (an identifier)
    #[arg(long, value_name = "SUBJECT")]
    pub(crate) subject: String,
    /// A permission the token holds, repeatable: refund:approve (or the approval permission
    /// `approvals show` names), ops:settle, outbox:resume
    #[arg(long = "permission", value_name = "PERMISSION", required = true)]
    pub(crate) permissions: Vec<String>,
    /// How long the token is accepted: a whole number of seconds, minutes, hours or days (45s,
    /// 30m, 8h, 7d), at most 90d
    #[arg(long, value_name = "DURATION", default_value = "8h", value_parser = lifetime)]
    pub(crate) lifetime: Duration,
}

/// `operators list --tenant TENANT`.
#[derive(Debug, PartialEq, Eq, Args)]
pub(crate) struct ListKeys {
    /// The tenant whose issuer keys are listed
    #[arg(long, value_name = "TENANT")]
    pub(crate) tenant: String,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

const INIT_HELP: &str = "\
Run once per issuer, by whoever will issue the tenant's operator tokens. It makes an Ed25519 key
pair: the secret key goes into --secret-file, a new file of mode 0600 (a file that exists is
never overwritten: give another path); the public key goes into the store (--store or
TOOLGATE_STORE), which then accepts the tokens the issuer signs for the tenant. The store never
holds the secret key. If the store cannot take the key, the file just written is removed.

It prints the key's id (kid, its RFC 7638 thumbprint, which each token names) and the command to
issue a token. Exit codes: 0 made, 1 the secret file exists, 2 usage error (a name that is not an
identifier), 3 store error.";

const ISSUE_HELP: &str = "\
Prints the token, and nothing else, on stdout: an EdDSA JWT naming the issuer, the subject, the
tenant and the permissions, valid for --lifetime. Give it to the operator, who passes it to the
commands that act (approvals approve and reject, outbox resume, ops settle) as --token or in
TOOLGATE_TOKEN:

  export TOOLGATE_TOKEN=$(toolgate operators issue --secret-file acme-ops.jwk \\
      --subject manager --permission refund:approve)

Needs no store. A secret file that group or others can read or write is refused (chmod 600 it).
Exit codes: 0 issued, 1 the secret file is open to others, 2 usage error (a subject or permission
that is not an identifier, a file that is not an issuer's secret key, a bad lifetime).";

/// The longest lifetime a token is issued for: a token is a bearer credential, and a new one is
/// a command away.
const MAX_LIFETIME: Duration = Duration::from_secs(90 * 86_400);

/// A token's lifetime: a whole number and a unit, `s`, `m`, `h` or `d` (`30m`, `8h`, `7d`),
/// more than nothing and at most [`MAX_LIFETIME`].
fn lifetime(text: &str) -> Result<Duration, String> {
    const FORM: &str = "a lifetime is a whole number and a unit: 45s, 30m, 8h or 7d";
    let unit_at = text.len().saturating_sub(1);
    let (number, unit) = (text.get(..unit_at), text.get(unit_at..));
    let seconds_a_unit: u64 = match unit {
        Some("s") => 1,
        Some("m") => 60,
        Some("h") => 3600,
        Some("d") => 86_400,
        _ => return Err(FORM.to_owned()),
    };
    let number = number
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .ok_or(FORM)?;
    let too_long = || "a token lasts at most 90d; issue a new one when it expires".to_owned();
    let count: u64 = number.parse().map_err(|_| too_long())?;
    if count == 0 {
        return Err("a token that lasts no time is never accepted: give at least 1s".to_owned());
    }
    let seconds = count.checked_mul(seconds_a_unit).ok_or_else(too_long)?;
    let lifetime = Duration::from_secs(seconds);
    if lifetime > MAX_LIFETIME {
        return Err(too_long());
    }
    Ok(lifetime)
}

#[cfg(test)]
mod tests {
    use super::super::Command;
    use super::super::tests::parse;
    use super::*;

    #[test]
    fn a_lifetime_is_a_whole_number_and_a_unit_of_at_most_90_days() {
        for (text, seconds) in [
            ("1s", 1),
            ("45s", 45),
            ("30m", 1800),
            ("8h", 28_800),
            ("7d", 604_800),
            ("90d", 7_776_000),
            ("2160h", 7_776_000),
        ] {
            assert_eq!(lifetime(text), Ok(Duration::from_secs(seconds)), "{text}");
        }
        for (text, says) in [
            ("", "a whole number and a unit"),
            ("8", "a whole number and a unit"),
            ("h", "a whole number and a unit"),
            ("8x", "a whole number and a unit"),
            ("1.5h", "a whole number and a unit"),
            ("-1h", "a whole number and a unit"),
            ("+1h", "a whole number and a unit"),
            (" 1h", "a whole number and a unit"),
            ("1 h", "a whole number and a unit"),
            ("８h", "a whole number and a unit"),
            ("1é", "a whole number and a unit"),
            ("0s", "lasts no time"),
            ("0d", "lasts no time"),
            ("91d", "at most 90d"),
            ("2161h", "at most 90d"),
            ("7776001s", "at most 90d"),
            ("213503982334601d", "at most 90d"),
            ("99999999999999999999999d", "at most 90d"),
        ] {
            let err = lifetime(text).expect_err(text);
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn operators_commands_parse() {
        let init = parse(&[
            "operators",
            "init",
            "--issuer",
            "acme-ops",
            "--tenant",
            "acme",
            "--secret-file",
            "acme-ops.jwk",
        ])
        .unwrap();
        assert_eq!(
            init.command,
            Command::Operators(Operators::Init(InitArgs {
                issuer: "acme-ops".into(),
                tenant: "acme".into(),
                secret_file: "acme-ops.jwk".into(),
            }))
        );
        let issue = parse(&[
            "operators",
            "issue",
            "--secret-file",
            "acme-ops.jwk",
            "--subject",
            "manager",
            "--permission",
            "refund:approve",
            "--permission",
            "ops:settle",
        ])
        .unwrap();
        assert_eq!(
            issue.command,
            Command::Operators(Operators::Issue(IssueArgs {
                secret_file: "acme-ops.jwk".into(),
                subject: "manager".into(),
                permissions: vec!["refund:approve".into(), "ops:settle".into()],
                lifetime: Duration::from_secs(8 * 3600),
            }))
        );
        let list = parse(&["operators", "list", "--tenant", "acme", "--json"]).unwrap();
        assert_eq!(
            list.command,
            Command::Operators(Operators::List(ListKeys {
                tenant: "acme".into(),
                json: true,
            }))
        );
        for (args, names) in [
            (
                &["operators", "issue", "--secret-file", "k", "--subject", "m"][..],
                "--permission",
            ),
            (
                &["operators", "init", "--issuer", "i", "--tenant", "t"][..],
                "--secret-file",
            ),
            (&["operators", "list"][..], "--tenant"),
        ] {
            let err = parse(args).expect_err("bad usage");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(err.to_string().contains(names), "{args:?}: {err}");
        }
    }
}
