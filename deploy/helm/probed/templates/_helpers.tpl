{{- define "probed.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "probed.labels" -}}
app.kubernetes.io/name: probed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "probed.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "probed.tlsSecret" -}}
{{ .Values.tls.existingSecret | default (printf "%s-tls" (include "probed.fullname" .)) }}
{{- end -}}

{{- define "probed.authSecret" -}}
{{ .Values.auth.existingSecret | default (printf "%s-auth" (include "probed.fullname" .)) }}
{{- end -}}

{{/* probed's Service host, which its certificate names. */}}
{{- define "probed.host" -}}
{{ include "probed.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end -}}
