//! The rights of the attacker Coxswain's security model names: a member of
//! one namespace who may write Flows, Runs and Approvals (every resource of
//! `coxswain.dev`, statuses included, as a loose Role grants) and
//! ConfigMaps there, and read pods, Jobs and logs — but not read Secrets
//! nor create pods or Jobs.

/// A Role `member` and a RoleBinding giving it to each of `users`, as YAML
/// for `kubectl apply` in the test's namespace.
pub fn member_role(users: &[&str]) -> String {
    let subjects: String = users
        .iter()
        .map(|u| format!("  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {u}}}\n"))
        .collect();
    format!(
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: member}}
rules:
  - apiGroups: [coxswain.dev]
    resources: ["*"]
    verbs: ["*"]
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [""]
    resources: [pods, pods/log]
    verbs: [get, list, watch]
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: members}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: member}}
subjects:
{subjects}"#
    )
}
