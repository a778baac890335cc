//! Who may decide a person step: one of its approvers (a user named, or a
//! member of a group named; anyone when it names none), and not the run's
//! creator unless the step allows self-approval. The admission webhook
//! checks it when the answer is written; the controller checks it again
//! before taking the answer in, from the identity the webhook stamped, so a
//! cluster without the webhook, or a write that went around it, is not
//! taken on trust.

use crate::api::Approvers;
use crate::text::quote_list;

/// Why a person may not decide a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeciderError {
    /// The answer carries no stamp of who wrote it.
    #[error(
        "the answer to step `{step}` does not say who wrote it (decidedBy, which Coxswain's mutating webhook stamps); a step with approvers, or one whose run's creator may not decide it, takes no answer without it"
    )]
    Unstamped {
        /// The approval step's key.
        step: String,
    },
    /// Not among the approvers.
    #[error("`{user}` may not decide step `{step}`: it is for {allowed}")]
    NotAnApprover {
        /// Who answered.
        user: String,
        /// The approval step's key.
        step: String,
        /// The approvers, listed.
        allowed: String,
    },
    /// The run's creator, on a step that does not allow it.
    #[error(
        "`{user}` created run {run} and may not decide its step `{step}` too (the step would need `allowSelfApproval: true`)"
    )]
    SelfApproval {
        /// Who answered.
        user: String,
        /// The run.
        run: String,
        /// The approval step's key.
        step: String,
    },
}

/// Who wrote an answer, as the API server authenticated them.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    /// The user name.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
}

/// The rule of a step about who decides it, as the flow states it.
#[derive(Debug, Clone, Copy)]
pub struct DeciderRule<'a> {
    /// The step's key.
    pub step: &'a str,
    /// The run, for messages.
    pub run: &'a str,
    /// Who may decide (`None` or empty: anyone).
    pub approvers: Option<&'a Approvers>,
    /// Whether the run's creator may decide.
    pub allow_self_approval: bool,
    /// Who created the run, when known.
    pub creator: Option<&'a str>,
}

/// Whether `decider` (`None`: nobody is stamped) may decide by `rule`.
pub fn check_decider(
    rule: DeciderRule<'_>,
    decider: Option<Decider<'_>>,
) -> Result<(), DeciderError> {
    let approvers = rule
        .approvers
        .filter(|a| !(a.users.is_empty() && a.groups.is_empty()));
    // Without a stamp nobody can tell who answered: a step that names its
    // approvers refuses it, and so does one whose run has a stamped creator
    // who may not decide it (the answer may be theirs). Only where nobody
    // is excluded (a run made without admission, or self-approval allowed)
    // does an unstamped answer count.
    let Some(decider) = decider else {
        let creator_excluded = rule.creator.is_some() && !rule.allow_self_approval;
        return if approvers.is_some() || creator_excluded {
            Err(DeciderError::Unstamped {
                step: rule.step.to_string(),
            })
        } else {
            Ok(())
        };
    };
    if let Some(approvers) = approvers {
        let allowed = approvers.users.iter().any(|u| u == decider.user)
            || approvers.groups.iter().any(|g| decider.groups.contains(g));
        if !allowed {
            return Err(DeciderError::NotAnApprover {
                user: decider.user.to_string(),
                step: rule.step.to_string(),
                allowed: describe_approvers(&approvers.users, &approvers.groups),
            });
        }
    }
    if !rule.allow_self_approval && rule.creator == Some(decider.user) {
        return Err(DeciderError::SelfApproval {
            user: decider.user.to_string(),
            run: rule.run.to_string(),
            step: rule.step.to_string(),
        });
    }
    Ok(())
}

/// The approvers as a person reads them: "users `a`, `b` and members of `g`".
pub fn describe_approvers(users: &[String], groups: &[String]) -> String {
    let list = |kind: &str, names: &[String]| format!("{kind} {}", quote_list(names));
    match (users.is_empty(), groups.is_empty()) {
        (false, true) => list("users", users),
        (true, false) => list("members of", groups),
        _ => format!(
            "{} and {}",
            list("users", users),
            list("members of", groups)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule<'a>(approvers: Option<&'a Approvers>, allow_self: bool) -> DeciderRule<'a> {
        DeciderRule {
            step: "review",
            run: "rel-1",
            approvers,
            allow_self_approval: allow_self,
            creator: Some("ana"),
        }
    }

    #[test]
    fn only_approvers_who_did_not_start_the_run_decide() {
        let approvers = Approvers {
            users: vec!["bob".into()],
            groups: vec!["editors".into()],
        };
        let none: &[String] = &[];
        let editors = ["editors".to_string()];
        let who = |user, groups| Some(Decider { user, groups });
        assert_eq!(
            check_decider(rule(Some(&approvers), false), who("bob", none)),
            Ok(())
        );
        assert_eq!(
            check_decider(rule(Some(&approvers), false), who("carol", &editors)),
            Ok(())
        );
        let eve = check_decider(rule(Some(&approvers), false), who("eve", none)).unwrap_err();
        assert_eq!(
            eve.to_string(),
            "`eve` may not decide step `review`: it is for users `bob` and members of `editors`"
        );
        // No approvers: anyone but the creator.
        assert_eq!(check_decider(rule(None, false), who("eve", none)), Ok(()));
        assert!(matches!(
            check_decider(rule(None, false), who("ana", none)),
            Err(DeciderError::SelfApproval { .. })
        ));
        assert_eq!(check_decider(rule(None, true), who("ana", none)), Ok(()));
    }

    #[test]
    fn an_unstamped_answer_counts_only_where_nobody_is_excluded() {
        let approvers = Approvers {
            users: vec!["bob".into()],
            groups: vec![],
        };
        assert!(matches!(
            check_decider(rule(Some(&approvers), true), None),
            Err(DeciderError::Unstamped { .. })
        ));
        // The run's creator may not decide: an unstamped answer may be theirs.
        assert!(matches!(
            check_decider(rule(None, false), None),
            Err(DeciderError::Unstamped { .. })
        ));
        assert_eq!(check_decider(rule(None, true), None), Ok(()));
        // A run made without admission names no creator: nobody is excluded.
        let unstamped_run = DeciderRule {
            creator: None,
            ..rule(None, false)
        };
        assert_eq!(check_decider(unstamped_run, None), Ok(()));
    }
}
