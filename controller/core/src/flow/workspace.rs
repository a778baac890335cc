//! Checking a flow's `workspace` when it is saved: repo names, URLs written
//! out with a scheme git can fetch from and no credentials in them, refs git
//! will not read as options, the branch prefix, and the volume's settings.

use std::collections::HashSet;

use crate::api::{FlowSpec, StepProblem, Workspace};

use super::checks::spelling_problem;
use super::graph::FlowGraph;
use super::placed::PlacedProblem;
use super::shape::FILE_TYPE;

/// The most repos one workspace checks out.
pub const MAX_REPOS: usize = 20;
/// The longest repo name (names become folder names and parts of messages).
const MAX_REPO_NAME: usize = 40;
/// The URL schemes a cluster can clone from.
pub const REPO_SCHEMES: [&str; 4] = ["https", "http", "git", "ssh"];

/// Where a flow is checked for: the cluster (admission, the controller,
/// `coxswain lint`) or `coxswain run` on this machine, which may also clone
/// `file` URLs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunsOn {
    /// A cluster: only network URLs.
    #[default]
    Cluster,
    /// `coxswain run`: `file` URLs too.
    Local,
}

/// What is wrong with a workspace, for the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceProblem {
    /// More repos than a workspace takes.
    #[error("the workspace lists {0} repos; at most {MAX_REPOS} are allowed")]
    TooManyRepos(usize),
    /// A repo name that is not step-key-like.
    #[error("{0}")]
    BadName(String),
    /// A repo name used twice.
    #[error("the repo name `{0}` is used twice; each repo needs a folder of its own")]
    DuplicateName(String),
    /// A placeholder or reference in a URL.
    #[error(
        "`{0}` holds a placeholder; a repo's URL is written out in the flow, so no run input can choose where the checkout comes from (or where its credentials go)"
    )]
    PlaceholderInUrl(String),
    /// Not a URL at all.
    #[error(
        "`{url}` is not a URL ({reason}); write it like https://git.example.com/team/app.git or ssh://git@git.example.com/team/app.git"
    )]
    NotAUrl {
        /// The URL as written.
        url: String,
        /// The parser's reason.
        reason: String,
    },
    /// A scheme git cannot fetch from here.
    #[error("`{url}` has the scheme `{scheme}`; a repo's URL is https, http, git or ssh")]
    BadScheme {
        /// The URL as written.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A `file` URL where the flow runs on a cluster.
    #[error(
        "`{0}` is a file URL, which only `coxswain run` can clone (a cluster's pods do not see this machine's folders); use https, http, git or ssh for a flow that runs on a cluster"
    )]
    FileOnCluster(String),
    /// A password or token in the URL.
    #[error(
        "`{0}` has a password in it, which would end up in the record and in logs; put the credentials in a Secret and name it in `secretRef`"
    )]
    PasswordInUrl(String),
    /// A ref git would not take, or would read as an option.
    #[error("`{reference}` is not a ref git can check out: {reason}")]
    BadRef {
        /// The ref as written.
        reference: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A negative depth.
    #[error("depth is {0}; it is 1 or more commits, or 0 for the whole history")]
    BadDepth(i32),
    /// A Secret name Kubernetes would refuse.
    #[error(
        "`{0}` is not a Secret name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 253 characters"
    )]
    BadSecretName(String),
    /// A branch prefix that makes no branch name.
    #[error("the branch prefix `{prefix}` cannot start a branch name: {reason}")]
    BadBranchPrefix {
        /// The prefix as written.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Pushing with nothing to push to.
    #[error("push is `{0}`, but the workspace has no repos to push the run's branch to")]
    PushWithoutRepos(&'static str),
    /// A size that is not a quantity.
    #[error("`{0}` is not a size; write it like `1Gi` or `500Mi`")]
    BadSize(String),
    /// A storage class name Kubernetes would refuse.
    #[error(
        "`{0}` is not a storage class name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit"
    )]
    BadStorageClass(String),
}

/// Every problem of a workspace, as `(field, problem)` with the field
/// relative to the flow's spec (`workspace.repos[1].url`, …).
pub fn check_workspace(ws: &Workspace, runs_on: RunsOn) -> Vec<(String, WorkspaceProblem)> {
    let mut problems = Vec::new();
    if ws.repos.len() > MAX_REPOS {
        problems.push((
            "workspace.repos".to_string(),
            WorkspaceProblem::TooManyRepos(ws.repos.len()),
        ));
    }
    let mut seen = HashSet::new();
    for (i, repo) in ws.repos.iter().enumerate() {
        let field = |name: &str| format!("workspace.repos[{i}].{name}");
        if let Some(problem) = name_problem(&repo.name) {
            problems.push((field("name"), problem));
        } else if !seen.insert(repo.name.as_str()) {
            problems.push((
                field("name"),
                WorkspaceProblem::DuplicateName(repo.name.clone()),
            ));
        }
        if let Some(problem) = url_problem(&repo.url, runs_on) {
            problems.push((field("url"), problem));
        }
        if let Some(reference) = &repo.ref_
            && let Some(reason) = ref_problem(reference)
        {
            problems.push((
                field("ref"),
                WorkspaceProblem::BadRef {
                    reference: reference.clone(),
                    reason,
                },
            ));
        }
        if let Some(depth) = repo.depth
            && depth < 0
        {
            problems.push((field("depth"), WorkspaceProblem::BadDepth(depth)));
        }
        if let Some(secret) = &repo.secret_ref
            && !is_dns_subdomain(&secret.name)
        {
            problems.push((
                field("secretRef.name"),
                WorkspaceProblem::BadSecretName(secret.name.clone()),
            ));
        }
    }
    if let Some(prefix) = &ws.branch_prefix
        && let Some(reason) = prefix_problem(prefix)
    {
        problems.push((
            "workspace.branchPrefix".to_string(),
            WorkspaceProblem::BadBranchPrefix {
                prefix: prefix.clone(),
                reason,
            },
        ));
    }
    if ws.repos.is_empty() {
        let push = match ws.push() {
            crate::api::PushPolicy::Never => None,
            crate::api::PushPolicy::OnSuccess => Some("onSuccess"),
            crate::api::PushPolicy::Always => Some("always"),
        };
        if let Some(push) = push {
            problems.push((
                "workspace.push".to_string(),
                WorkspaceProblem::PushWithoutRepos(push),
            ));
        }
    }
    if let Some(size) = &ws.size
        && !is_quantity(&size.0)
    {
        problems.push((
            "workspace.size".to_string(),
            WorkspaceProblem::BadSize(size.0.clone()),
        ));
    }
    if let Some(class) = &ws.storage_class_name
        && !is_dns_subdomain(class)
    {
        problems.push((
            "workspace.storageClassName".to_string(),
            WorkspaceProblem::BadStorageClass(class.clone()),
        ));
    }
    problems
}

/// What `coxswain lint` warns of without refusing the flow: each `file`
/// field a script declares in a flow with no workspace, whose file is gone
/// once its step ends, so no later step can read it.
pub fn workspace_warnings(spec: &FlowSpec) -> Vec<PlacedProblem> {
    if spec.workspace.is_some() {
        return Vec::new();
    }
    let graph = FlowGraph::new(&spec.steps);
    let mut warnings = Vec::new();
    for node in &graph.nodes {
        let scripts = [
            (node.step.script.as_ref(), "script"),
            (
                node.step
                    .parallel
                    .as_ref()
                    .and_then(|p| p.step.script.as_ref()),
                "parallel.step.script",
            ),
        ];
        for (script, at) in scripts {
            let Some(output) = script.and_then(|s| s.output.as_ref()) else {
                continue;
            };
            for (i, field) in output.fields.iter().enumerate() {
                if field.type_ != FILE_TYPE {
                    continue;
                }
                let field_path = format!("{at}.output.fields[{i}].type");
                warnings.push(PlacedProblem {
                    path: format!("{}.{field_path}", node.location),
                    problem: StepProblem {
                        step: node.key.to_string(),
                        field: field_path,
                        message: format!(
                            "the script names a file it leaves in $OUTPUTS (`{}`), but the flow declares no workspace, so the file is gone when the step ends and no later step can read it; add `workspace: {{}}` to the flow's spec to keep it",
                            field.name
                        ),
                        character: None,
                    },
                });
            }
        }
    }
    warnings
}

/// A repo name is a folder name that reads like a step key.
fn name_problem(name: &str) -> Option<WorkspaceProblem> {
    let bad = |m: String| Some(WorkspaceProblem::BadName(m));
    let mut chars = name.chars();
    match chars.next() {
        None => return bad("a repo needs a name: the folder it is checked out in".into()),
        Some(c) if !c.is_ascii_lowercase() => {
            return bad(format!(
                "the repo name `{name}` must start with a lowercase letter"
            ));
        }
        _ => {}
    }
    spelling_problem(
        "the repo name",
        name,
        |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_',
        "lowercase letters, digits and `_`",
        MAX_REPO_NAME,
    )
    .map(WorkspaceProblem::BadName)
}

fn url_problem(url: &str, runs_on: RunsOn) -> Option<WorkspaceProblem> {
    if url.contains("{{") || url.contains("}}") || url.starts_with('$') {
        return Some(WorkspaceProblem::PlaceholderInUrl(url.to_string()));
    }
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => {
            return Some(WorkspaceProblem::NotAUrl {
                url: url.to_string(),
                reason: e.to_string(),
            });
        }
    };
    match (parsed.scheme(), runs_on) {
        (s, _) if REPO_SCHEMES.contains(&s) => {}
        ("file", RunsOn::Local) => {}
        ("file", RunsOn::Cluster) => return Some(WorkspaceProblem::FileOnCluster(url.into())),
        (scheme, _) => {
            return Some(WorkspaceProblem::BadScheme {
                url: url.to_string(),
                scheme: scheme.to_string(),
            });
        }
    }
    if parsed.password().is_some() {
        return Some(WorkspaceProblem::PasswordInUrl(url.to_string()));
    }
    if parsed.scheme() != "file" && parsed.host_str().is_none_or(str::is_empty) {
        return Some(WorkspaceProblem::NotAUrl {
            url: url.to_string(),
            reason: "it names no host".into(),
        });
    }
    None
}

/// The rules of `git check-ref-format` that matter here, and no leading
/// `-`, which git would read as an option.
fn ref_problem(reference: &str) -> Option<&'static str> {
    if reference.is_empty() {
        return Some("it is empty; leave `ref` out to start from the remote's HEAD");
    }
    if reference.starts_with('-') {
        return Some("it starts with `-`");
    }
    ref_text_problem(reference)
}

fn ref_text_problem(text: &str) -> Option<&'static str> {
    if text
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        return Some("it has a space, a control character or one of ~ ^ : ? * [ \\");
    }
    if text.contains("..") || text.contains("@{") || text.contains("//") {
        return Some("it has `..`, `@{` or `//`");
    }
    if text.starts_with('/') || text.ends_with(".lock") || text.ends_with('.') {
        return Some("it starts with `/` or ends with `.` or `.lock`");
    }
    if text.split('/').any(|part| part.starts_with('.')) {
        return Some("a part of it starts with `.`");
    }
    None
}

fn prefix_problem(prefix: &str) -> Option<&'static str> {
    if prefix.starts_with('-') {
        return Some("it starts with `-`");
    }
    if prefix.is_empty() {
        return None;
    }
    if prefix.starts_with('/') {
        return Some("it starts with `/`");
    }
    // The run's name follows the prefix, so a trailing `/` or `.` is fine.
    ref_text_problem(&format!("{prefix}x"))
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A Kubernetes quantity as people write sizes: digits (with a fraction),
/// then an optional binary or decimal suffix.
fn is_quantity(text: &str) -> bool {
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.chars().filter(|c| *c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit());
    let suffixes = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
    ];
    number_ok && suffixes.contains(&suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Workspace, WorkspaceRepo};

    fn repo(name: &str, url: &str) -> WorkspaceRepo {
        WorkspaceRepo {
            name: name.into(),
            url: url.into(),
            ..Default::default()
        }
    }

    fn problems(ws: &Workspace, on: RunsOn) -> Vec<String> {
        check_workspace(ws, on)
            .into_iter()
            .map(|(f, p)| format!("{f}: {p}"))
            .collect()
    }

    #[test]
    fn a_good_workspace_has_no_problems() {
        let ws = Workspace {
            repos: vec![
                repo("app", "https://git.example.com/team/app.git"),
                repo("docs", "ssh://git@git.example.com/team/docs.git"),
                repo("lib", "git://git.example.com/lib"),
            ],
            branch_prefix: Some("bots/coxswain-".into()),
            size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                "1.5Gi".into(),
            )),
            storage_class_name: Some("fast".into()),
            ..Default::default()
        };
        assert_eq!(problems(&ws, RunsOn::Cluster), Vec::<String>::new());
        assert!(problems(&Workspace::default(), RunsOn::Cluster).is_empty());
    }

    #[test]
    fn names_must_be_key_like_and_unique() {
        let ws = Workspace {
            repos: vec![
                repo("App", "https://h/a"),
                repo("a-b", "https://h/a"),
                repo("x", "https://h/a"),
                repo("x", "https://h/b"),
            ],
            ..Default::default()
        };
        let p = problems(&ws, RunsOn::Cluster);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(
            p[0].starts_with(
                "workspace.repos[0].name: the repo name `App` must start with a lowercase letter"
            ),
            "{p:?}"
        );
        assert!(p[1].contains("has `-`"), "{p:?}");
        assert_eq!(
            p[2],
            "workspace.repos[3].name: the repo name `x` is used twice; each repo needs a folder of its own"
        );
    }

    #[test]
    fn urls_are_written_out_with_a_fetchable_scheme() {
        let ws = Workspace {
            repos: vec![
                repo("a", "https://{{input.json.host}}/app.git"),
                repo("b", "ftp://h/app.git"),
                repo("c", "file:///srv/git/app.git"),
                repo("d", "https://me:hunter2@h/app.git"),
                repo("e", "git@h:team/app.git"),
            ],
            ..Default::default()
        };
        let p = problems(&ws, RunsOn::Cluster);
        assert_eq!(p.len(), 5, "{p:?}");
        assert!(p[0].contains("holds a placeholder"), "{p:?}");
        assert!(p[1].contains("has the scheme `ftp`"), "{p:?}");
        assert!(p[2].contains("only `coxswain run` can clone"), "{p:?}");
        assert!(p[3].contains("has a password in it"), "{p:?}");
        assert!(
            p[4].starts_with("workspace.repos[4].url: `git@h:team/app.git` is not a URL"),
            "{p:?}"
        );
        let local = problems(&ws, RunsOn::Local);
        assert_eq!(local.len(), 4, "file URLs pass for coxswain run: {local:?}");
    }

    #[test]
    fn refs_that_git_would_read_as_options_are_refused() {
        let mut bad = repo("a", "https://h/a");
        bad.ref_ = Some("--upload-pack=touch /tmp/x".into());
        bad.depth = Some(-1);
        let mut ok = repo("b", "https://h/b");
        ok.ref_ = Some("release/1.4".into());
        let ws = Workspace {
            repos: vec![bad, ok],
            branch_prefix: Some("-x".into()),
            ..Default::default()
        };
        let p = problems(&ws, RunsOn::Cluster);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with("workspace.repos[0].ref:") && p[0].contains("starts with `-`"));
        assert!(p[1].starts_with("workspace.repos[0].depth: depth is -1"));
        assert!(p[2].starts_with("workspace.branchPrefix:"));
    }

    #[test]
    fn push_needs_repos_and_sizes_are_quantities() {
        let ws = Workspace {
            push: Some(crate::api::PushPolicy::OnSuccess),
            size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                "lots".into(),
            )),
            storage_class_name: Some("Fast_SSD".into()),
            ..Default::default()
        };
        let p = problems(&ws, RunsOn::Cluster);
        assert_eq!(
            p,
            [
                "workspace.push: push is `onSuccess`, but the workspace has no repos to push the run's branch to",
                "workspace.size: `lots` is not a size; write it like `1Gi` or `500Mi`",
                "workspace.storageClassName: `Fast_SSD` is not a storage class name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit",
            ]
        );
    }

    #[test]
    fn the_validator_reports_workspace_problems_and_file_fields_where_they_belong() {
        let spec: crate::api::FlowSpec = serde_yaml::from_str(
            "workspace:\n  repos: [{name: app, url: 'file:///srv/app.git'}]\nsteps:\n  - key: make\n    script: {source: x, output: {fields: [{name: report, type: file}]}}\n  - key: ask\n    agent: {prompt: p, reply: {format: json, fields: [{name: f, type: file}]}}\n",
        )
        .expect("flow");
        let problems: Vec<String> = crate::flow::validate(&spec)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("step ask: agent.reply.fields[0].type: `file` fields are for scripts"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("workspace.repos[0].url: `file:///srv/app.git` is a file URL"),
            "{problems:?}"
        );
        let local = crate::flow::Limits {
            runs_on: RunsOn::Local,
            ..Default::default()
        };
        assert_eq!(crate::flow::validate_with(&spec, &local).len(), 1);
    }

    #[test]
    fn file_fields_without_a_workspace_are_warned_of() {
        let yaml = "steps:\n  - key: make\n    script: {source: x, output: {fields: [{name: n, type: string}, {name: report, type: file}]}}\n";
        let spec: crate::api::FlowSpec = serde_yaml::from_str(yaml).expect("flow");
        let warnings = workspace_warnings(&spec);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].path, "steps[0].script.output.fields[1].type");
        assert!(warnings[0].problem.to_string().starts_with(
            "step make: script.output.fields[1].type: the script names a file it leaves in $OUTPUTS (`report`), but the flow declares no workspace"
        ));
        let with: crate::api::FlowSpec =
            serde_yaml::from_str(&format!("workspace: {{}}\n{yaml}")).expect("flow");
        assert!(workspace_warnings(&with).is_empty());
    }
}
