//go:build tools

// Package tools pins the helm command this repository's CI builds from Go
// modules (e2e/helm/build), so go.sum records exactly which helm is used.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
