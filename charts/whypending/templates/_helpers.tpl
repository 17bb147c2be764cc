{{/* whypending.name: the name of every object of the release. */}}
{{- define "whypending.name" -}}{{ .Release.Name }}-whypending{{- end -}}

{{/* whypending.selectorLabels: the labels the Deployment, Service and PDB select on. */}}
{{- define "whypending.selectorLabels" -}}
app.kubernetes.io/name: whypending
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* whypending.labels: the labels of every object. */}}
{{- define "whypending.labels" -}}
{{ include "whypending.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* whypending.storeNamespace: where RemediationRequests and the digest Lease live. */}}
{{- define "whypending.storeNamespace" -}}
{{ .Values.config.store.namespace | default .Release.Namespace }}
{{- end -}}

{{/* whypending.inCluster: "true" when a configured cluster is the one the bot runs in, so the
bot needs this cluster's RBAC and its ServiceAccount token. */}}
{{- define "whypending.inCluster" -}}
{{- $in := false }}
{{- range .Values.config.clusters }}{{ if .inCluster }}{{ $in = true }}{{ end }}{{ end }}
{{- if $in }}true{{ end -}}
{{- end -}}

{{/* whypending.storeInCluster: "true" when store.cluster (default: the first cluster), which
holds the approval records (store.backend kubernetes) and the digest's Lease, is the cluster
the bot runs in. */}}
{{- define "whypending.storeInCluster" -}}
{{- $store := .Values.config.store | default dict -}}
{{- $name := $store.cluster | default (index .Values.config.clusters 0).name -}}
{{- $in := false }}
{{- range .Values.config.clusters }}{{ if and (eq .name $name) .inCluster }}{{ $in = true }}{{ end }}{{ end }}
{{- if $in }}true{{ end -}}
{{- end -}}

{{/* whypending.chatPaths: the HTTP paths chat platforms POST to in this configuration. */}}
{{- define "whypending.chatPaths" -}}
{{- if and .Values.config.slack (eq (.Values.config.slack.mode | default "http") "http") }}
- /slack/commands
- /slack/interactions
{{- end }}
{{- if and .Values.discord.enabled (eq .Values.discord.mode "http") }}
- /discord/interactions
{{- end }}
{{- end -}}

{{/* whypending.authorizationMode: config.authorization.mode, "off" when unset (YAML's bare
off, read as false, is off too). */}}
{{- define "whypending.authorizationMode" -}}
{{- $az := .Values.config.authorization | default dict -}}
{{- $az.mode | default "off" -}}
{{- end -}}
