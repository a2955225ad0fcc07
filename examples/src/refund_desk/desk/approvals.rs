//! The desk's approval lines: an approver decides what waits, and the application's runner runs
//! what was approved.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate::AuthContext;
use toolgate::identity::{IssuerSecret, Operator, TokenVerifier};
use toolgate::store::{ApprovalQuery, ApprovalStatus, DecideRequest, Decided, Verdict};

use super::Desk;
use crate::refund_desk::narrate::Voice;
use crate::refund_desk::script::shortened;

impl Desk {
    /// The script's approver, signed in as an application signs its operators in: a token of
    /// the desk's own issuer, checked like any operator token. The script names who approves,
    /// as a person signing in would; a name that is not an identifier is refused here.
    fn sign_in(&self, typed: &AuthContext) -> Result<Operator, String> {
        let issuer =
            IssuerSecret::generate("refund-desk", typed.tenant()).map_err(|e| e.to_string())?;
        let now_ms = self.clock.now_ms();
        let permissions: Vec<&str> = typed.permissions().collect();
        let token = issuer
            .issue(typed.user(), &permissions, Duration::from_secs(300), now_ms)
            .map_err(|e| e.to_string())?;
        let verifier = TokenVerifier::new(vec![issuer.public()]);
        Operator::authenticate(&verifier, &token, now_ms).map_err(|e| e.to_string())
    }

    /// Decides every approval waiting in the approver's tenant, oldest first. A refused decision
    /// (self-approval, a missing permission, an expiry) is the line's `{"error": …}`, and the
    /// approvals after it are left waiting.
    pub(super) async fn decide(
        &mut self,
        verdict: Verdict,
        approver: &AuthContext,
        reason: &str,
    ) -> Result<Value, String> {
        let approver = match self.sign_in(approver) {
            Ok(approver) => approver,
            Err(why) => {
                self.say(
                    Voice::Bad,
                    &format!("{} cannot sign in: {why}", approver.user()),
                );
                return Ok(json!({"error": why}));
            }
        };
        let approver = &approver;
        let dispatcher = self.dispatcher().await?;
        let store = dispatcher
            .store()
            .ok_or("the desk's dispatcher has no store")?;
        let query = ApprovalQuery {
            tenant: Some(approver.tenant()),
            status: Some(ApprovalStatus::Pending),
            limit: 0,
        };
        let waiting = store
            .list_approvals(query)
            .await
            .map_err(|err| format!("cannot list the approvals: {err}"))?;
        let mut decided = Vec::new();
        for approval in waiting {
            let request = DecideRequest {
                id: &approval.id,
                approver,
                verdict,
                reason,
                now_ms: self.clock.now_ms(),
            };
            let answer = toolgate::approval::decide(store, request)
                .await
                .map_err(|err| format!("cannot decide on {}: {err}", approval.id))?;
            match answer {
                Decided::Applied(after) => {
                    self.say(
                        if verdict == Verdict::Approve {
                            Voice::Good
                        } else {
                            Voice::Bad
                        },
                        &format!(
                            "{} {}s {} {} (amount {}): {reason}",
                            approver.subject(),
                            verdict.as_str(),
                            after.tool,
                            shortened(&after.arguments, 120),
                            after.amount
                        ),
                    );
                    decided.push(json!({"operation": after.key, "status": after.status.as_str()}));
                }
                Decided::Refused { refusal, approval } => {
                    let why = refusal.explain(approval.as_ref());
                    self.say(
                        Voice::Bad,
                        &format!("{} may not decide: {why}", approver.subject()),
                    );
                    self.aside(
                        "An approver must hold the tool's approval permission, belong to the \
                         tenant, and not be the one who asked: toolgate refuses anything else.",
                    );
                    return Ok(json!({"error": why}));
                }
            }
        }
        if decided.is_empty() {
            self.say(Voice::Title, "nothing waits for a decision");
        }
        Ok(json!({"decided": decided}))
    }

    /// One pass of the runner of approved operations.
    pub(super) async fn run_approved(&mut self) -> Result<Value, String> {
        let dispatcher = self.dispatcher().await?;
        let pass = dispatcher
            .run_approved(100)
            .await
            .map_err(|err| format!("the runner of approved operations failed: {err}"))?;
        for approval in &pass.expired {
            self.say(
                Voice::Bad,
                &format!(
                    "approval {} of {} expired: rejected",
                    approval.id, approval.tool
                ),
            );
        }
        let executed: Vec<Value> = pass
            .executed
            .iter()
            .map(|done| {
                let status = done.result.status.as_str();
                self.say(
                    if done.result.is_succeeded() {
                        Voice::Good
                    } else {
                        Voice::Bad
                    },
                    &format!(
                        "runner → {} {}: {status}",
                        done.approval.tool,
                        shortened(&done.approval.arguments, 120)
                    ),
                );
                json!({"operation": done.approval.key, "status": status})
            })
            .collect();
        if executed.is_empty() {
            self.say(Voice::Title, "runner: nothing approved waits to run");
        } else {
            self.aside(
                "An approved refund runs once, under its original key: whichever comes first, \
                 the runner or the model asking again, and the other reads its outcome.",
            );
        }
        Ok(json!({"executed": executed}))
    }
}
