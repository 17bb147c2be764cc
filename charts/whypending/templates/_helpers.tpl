{{- define "whypending.name" -}}{{ .Release.Name }}-whypending{{- end -}}
{{- define "whypending.labels" -}}
app.kubernetes.io/name: whypending
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
