{{/* The chart's name, as `nameOverride` may change it. */}}
{{- define "coxswain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Name of the release's objects: the release name, followed by the chart's
name unless the release name already contains it. */}}
{{- define "coxswain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of cluster-scoped objects (ClusterRoles, bindings, webhook
configurations): the full name and the release namespace, so two releases in
two namespaces never overwrite each other's. */}}
{{- define "coxswain.clusterName" -}}
{{- printf "%s-%s" (include "coxswain.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coxswain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "coxswain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "coxswain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coxswain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "coxswain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "coxswain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace whose Runs the controller reconciles when scope is
`namespace`. */}}
{{- define "coxswain.watchNamespace" -}}
{{- default .Release.Namespace .Values.watchNamespace }}
{{- end }}

{{- define "coxswain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "coxswain.webhookServiceName" -}}
{{- printf "%s-webhook" (include "coxswain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coxswain.webhookTlsSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "coxswain.fullname" .)) .Values.webhook.tlsSecretName | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* How the controller serves admission in the cluster: the variables of
its `--webhook-*` flags (controller/k8s/src/admission/settings.rs). The
controller's own user is named, so its writes (Approvals it asks) pass. */}}
{{- define "coxswain.controllerUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "coxswain.serviceAccountName" .) }}
{{- end }}

{{/* Where a client CA of webhook.clientCA is mounted, and its file. */}}
{{- define "coxswain.webhookClientCAFile" -}}
/etc/coxswain/webhook-client-ca/ca.crt
{{- end }}

{{- define "coxswain.webhookEnv" -}}
- name: COXSWAIN_WEBHOOK_SERVICE
  value: {{ include "coxswain.webhookServiceName" . | quote }}
- name: COXSWAIN_WEBHOOK_SERVICE_PORT
  value: "443"
- name: COXSWAIN_WEBHOOK_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: COXSWAIN_WEBHOOK_LISTEN
  value: {{ printf "0.0.0.0:%d" (int .Values.webhook.port) | quote }}
- name: COXSWAIN_WEBHOOK_CONFIG_NAME
  value: {{ include "coxswain.clusterName" . | quote }}
- name: COXSWAIN_WEBHOOK_CONTROLLER_USER
  value: {{ include "coxswain.controllerUser" . | quote }}
{{- if .Values.webhook.clientCA.configMapName }}
- name: COXSWAIN_WEBHOOK_CLIENT_CA
  value: {{ include "coxswain.webhookClientCAFile" . | quote }}
{{- end }}
{{- if .Values.webhook.certManager.enabled }}
- name: COXSWAIN_WEBHOOK_CERT_DIR
  value: /etc/coxswain/webhook-tls
- name: COXSWAIN_WEBHOOK_REGISTER
  value: "false"
{{- else }}
- name: COXSWAIN_WEBHOOK_SECRET
  value: {{ include "coxswain.webhookTlsSecretName" . | quote }}
{{- end }}
{{- end }}

{{/* One webhook of a configuration: what every coxswain.dev webhook shares
(admission/register.rs). */}}
{{- define "coxswain.webhook" -}}
admissionReviewVersions: [v1]
sideEffects: None
failurePolicy: Fail
matchPolicy: Equivalent
timeoutSeconds: 5
clientConfig:
  service:
    {{- toYaml (set (deepCopy .service) "path" .path) | nindent 4 }}
rules:
  - apiGroups: [coxswain.dev]
    apiVersions: ["*"]
    operations: {{ toJson .operations }}
    resources: {{ toJson .resources }}
    scope: Namespaced
{{- with .selector }}
namespaceSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The model provider agent steps call: the variables
AgentConfig::from_lookup (controller/steps/src/agent/mod.rs) reads; the API
key only from a Secret. */}}
{{- define "coxswain.agentEnv" -}}
{{- $a := .Values.agent -}}
{{- with $a.baseUrl }}
- name: COXSWAIN_AGENT_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{- with $a.model }}
- name: COXSWAIN_AGENT_MODEL
  value: {{ . | quote }}
{{- end }}
{{- with $a.provider }}
- name: COXSWAIN_AGENT_PROVIDER
  value: {{ . | quote }}
{{- end }}
{{- with $a.mode }}
- name: COXSWAIN_AGENT_MODE
  value: {{ . | quote }}
{{- end }}
{{- with $a.timeout }}
- name: COXSWAIN_AGENT_TIMEOUT
  value: {{ . | quote }}
{{- end }}
{{- with $a.maxTokens }}
- name: COXSWAIN_AGENT_MAX_TOKENS
  value: {{ . | quote }}
{{- end }}
{{- with $a.apiKeySecret.name }}
- name: COXSWAIN_AGENT_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $a.apiKeySecret.key }}
{{- end }}
{{- end }}

{{/* The run viewer (`coxswain ui`, values `ui.*`): its objects' name, its
pods' labels (component `ui`, so no controller Service or budget selects
them), its image (the controller's unless `ui.image`). */}}
{{- define "coxswain.uiName" -}}
{{- printf "%s-ui" (include "coxswain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coxswain.uiSelectorLabels" -}}
app.kubernetes.io/name: {{ include "coxswain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: ui
{{- end }}

{{- define "coxswain.uiLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "coxswain.uiSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "coxswain.uiImage" -}}
{{- default (include "coxswain.image" .) .Values.ui.image }}
{{- end }}
