//! Who is signed in to the console: a session per operator who signed in with a token, kept in
//! the console's memory (a restart signs everyone out), named by an HttpOnly, SameSite=Strict
//! cookie, with a CSRF token every form of the session carries.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use toolgate_core::identity::Operator;

/// The cookie naming a session.
pub(crate) const SESSION_COOKIE: &str = "toolgate_session";

/// The cookie of the sign-in form: its CSRF token, before any session exists.
pub(crate) const LOGIN_COOKIE: &str = "toolgate_login";

/// How long a session lasts at most, whatever its token's lifetime: 8 hours.
const SESSION_MS: i64 = 8 * 3_600_000;

/// How many sessions the console keeps at once; signing in past it ends the oldest.
const MAX_SESSIONS: usize = 1024;

/// A signed-in operator.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Whom the token proved.
    pub(crate) operator: Operator,
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    /// When it ends: its token's expiry, or 8 hours after signing in, whichever is first.
    pub(crate) expires_ms: i64,
    /// What the last action came to, shown once on the next page.
    pub(crate) flash: Option<Flash>,
}

/// What an action came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Flash {
    /// Done, and what it means.
    Done(String),
    /// Refused or failed: what, why, what to do.
    Failed {
        what: String,
        why: String,
        next: String,
    },
}

/// The sessions, by their cookie's value.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session of `operator` at `now_ms`: its cookie value.
    pub(crate) fn open(&self, operator: Operator, now_ms: i64) -> String {
        let id = random_token();
        let expires_ms = operator.expires_ms().min(now_ms.saturating_add(SESSION_MS));
        let session = Session {
            operator,
            csrf: random_token(),
            expires_ms,
            flash: None,
        };
        let mut open = self.open.lock().expect("sessions");
        open.retain(|_, s| s.expires_ms > now_ms);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.expires_ms)
                .map(|(id, _)| id.clone())
        {
            open.remove(&oldest);
        }
        open.insert(id.clone(), session);
        id
    }

    /// The session `id` names at `now_ms`, its flash taken: none when it ended or never was.
    pub(crate) fn get(&self, id: &str, now_ms: i64) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions");
        let session = open.get_mut(id)?;
        if session.expires_ms <= now_ms {
            open.remove(id);
            return None;
        }
        let taken = session.clone();
        session.flash = None;
        Some(taken)
    }

    /// Keeps `flash` for the next page of session `id`.
    pub(crate) fn flash(&self, id: &str, flash: Flash) {
        if let Some(session) = self.open.lock().expect("sessions").get_mut(id) {
            session.flash = Some(flash);
        }
    }

    /// Ends session `id`.
    pub(crate) fn close(&self, id: &str) {
        self.open.lock().expect("sessions").remove(id);
    }
}

/// 32 random bytes as base64url: a session id or a CSRF token.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's randomness");
    B64.encode(bytes)
}

/// Whether `given` is `expected`, compared in time that does not depend on where they differ.
pub(crate) fn same_token(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    if given.len() != expected.len() || expected.is_empty() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

/// The `Set-Cookie` value of the session cookie holding `id`: HttpOnly (no script reads it),
/// SameSite=Strict (no other site's page sends it), for the whole console.
pub(crate) fn session_cookie(id: &str) -> String {
    format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that ends the session cookie.
pub(crate) fn ended_session_cookie() -> String {
    format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The `Set-Cookie` value of the sign-in form's CSRF cookie.
pub(crate) fn login_cookie(token: &str) -> String {
    format!("{LOGIN_COOKIE}={token}; Path=/login; HttpOnly; SameSite=Strict; Max-Age=3600")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolgate_core::identity::{IssuerSecret, TokenVerifier};

    use super::*;

    const NOW_MS: i64 = 1_800_000_000_000;

    /// The manager of acme, whose token expires `lifetime` after `NOW_MS`.
    fn manager(lifetime: Duration) -> Operator {
        let secret = IssuerSecret::generate("acme-ops", "acme").unwrap();
        let token = secret.issue("manager", &[], lifetime, NOW_MS).unwrap();
        Operator::authenticate(&TokenVerifier::new(vec![secret.public()]), &token, NOW_MS).unwrap()
    }

    #[test]
    fn a_session_ends_when_its_token_does_or_after_8_hours() {
        let sessions = Sessions::default();
        let short = sessions.open(manager(Duration::from_secs(60)), NOW_MS);
        let long = sessions.open(manager(Duration::from_secs(86_400)), NOW_MS);
        assert!(sessions.get(&short, NOW_MS + 59_999).is_some());
        assert!(sessions.get(&short, NOW_MS + 60_000).is_none());
        assert!(
            sessions.get(&short, NOW_MS).is_none(),
            "an ended session is gone"
        );
        assert!(sessions.get(&long, NOW_MS + SESSION_MS - 1).is_some());
        assert!(sessions.get(&long, NOW_MS + SESSION_MS).is_none());
        assert!(sessions.get("no-such-session", NOW_MS).is_none());
    }

    #[test]
    fn a_flash_is_shown_once_and_a_closed_session_is_gone() {
        let sessions = Sessions::default();
        let id = sessions.open(manager(Duration::from_secs(3600)), NOW_MS);
        sessions.flash(&id, Flash::Done("approved".into()));
        let first = sessions.get(&id, NOW_MS).unwrap();
        assert_eq!(first.flash, Some(Flash::Done("approved".into())));
        assert_eq!(sessions.get(&id, NOW_MS).unwrap().flash, None);
        sessions.close(&id);
        assert!(sessions.get(&id, NOW_MS).is_none());
    }

    #[test]
    fn past_the_limit_the_session_that_ends_first_is_closed() {
        let sessions = Sessions::default();
        let first = sessions.open(manager(Duration::from_secs(60)), NOW_MS);
        let hour = manager(Duration::from_secs(3600));
        let rest: Vec<String> = (1..MAX_SESSIONS)
            .map(|_| sessions.open(hour.clone(), NOW_MS))
            .collect();
        assert!(sessions.get(&first, NOW_MS).is_some());
        let newest = sessions.open(manager(Duration::from_secs(3600)), NOW_MS);
        assert!(sessions.get(&first, NOW_MS).is_none());
        assert!(sessions.get(&newest, NOW_MS).is_some());
        assert!(rest.iter().all(|id| sessions.get(id, NOW_MS).is_some()));
    }

    #[test]
    fn tokens_compare_exactly() {
        let token = random_token();
        assert_eq!(token.len(), 43);
        assert!(same_token(&token, &token));
        assert!(!same_token(&random_token(), &token));
        assert!(!same_token("", ""));
        assert!(!same_token(&token[..42], &token));
    }
}
