{{- define "probed.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{/* The controller's name: its Deployment, ServiceAccount, Service, Lease
and webhook. */}}
{{- define "probed.controllerName" -}}
{{ include "probed.fullname" . }}-kube
{{- end -}}

{{- define "probed.labels" -}}
app.kubernetes.io/name: probed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of a component (probed, controller): include with
(list $ "component"). */}}
{{- define "probed.selectorLabels" -}}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "probed.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "probed.tlsSecret" -}}
{{ .Values.tls.existingSecret | default (printf "%s-tls" (include "probed.fullname" .)) }}
{{- end -}}

{{- define "probed.authSecret" -}}
{{ .Values.auth.existingSecret | default (printf "%s-auth" (include "probed.fullname" .)) }}
{{- end -}}

{{- define "probed.webhookSecret" -}}
{{ .Values.controller.webhook.tls.existingSecret | default (printf "%s-webhook-tls" (include "probed.controllerName" .)) }}
{{- end -}}

{{/* Whether the chart generates probed's TLS Secret ("true" or ""). */}}
{{- define "probed.generatesTLS" -}}
{{- if not (or .Values.tls.existingSecret .Values.certManager.enabled) }}true{{ end -}}
{{- end -}}

{{- define "probed.generatesWebhookTLS" -}}
{{- if and .Values.controller.enabled .Values.controller.webhook.enabled (not (or .Values.controller.webhook.tls.existingSecret .Values.certManager.enabled)) }}true{{ end -}}
{{- end -}}

{{/* probed's Service host, which its certificate names. */}}
{{- define "probed.host" -}}
{{ include "probed.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* The DNS names of probed's certificate: its Service, the Service's
cluster-local name, every replica behind the headless Service. */}}
{{- define "probed.dnsNames" -}}
{{- $fullname := include "probed.fullname" . -}}
{{- $host := include "probed.host" . -}}
{{- toYaml (list $fullname $host (printf "%s.cluster.local" $host) (printf "*.%s-headless.%s.svc" $fullname .Release.Namespace) (printf "*.%s-headless.%s.svc.cluster.local" $fullname .Release.Namespace)) -}}
{{- end -}}

{{- define "probed.webhookDNSNames" -}}
{{- $host := printf "%s.%s.svc" (include "probed.controllerName" .) .Release.Namespace -}}
{{- toYaml (list $host (printf "%s.cluster.local" $host)) -}}
{{- end -}}

{{/* probed.generated returns, as YAML, the data of the Secret the chart
generates named by its argument (list $ "tls" | "auth" | "webhook"): the
data of the Secret in the cluster when there is one (helm upgrade keeps
it), or new. Each is made once per render and remembered, so that the
Secret and the checksum annotations of the pods that mount it agree. */}}
{{- define "probed.generated" -}}
{{- $ := index . 0 -}}
{{- $which := index . 1 -}}
{{- if not (hasKey $.Values "__generated") -}}{{- $_ := set $.Values "__generated" dict -}}{{- end -}}
{{- $memo := get $.Values "__generated" -}}
{{- if not (hasKey $memo $which) -}}
{{- $fullname := include "probed.fullname" $ -}}
{{- $data := dict -}}
{{- if eq $which "tls" -}}
{{- $old := lookup "v1" "Secret" $.Release.Namespace (printf "%s-tls" $fullname) -}}
{{- if and $old (index $old.data "tls.key") -}}
{{- $data = dict "ca.crt" (index $old.data "ca.crt") "tls.crt" (index $old.data "tls.crt") "tls.key" (index $old.data "tls.key") -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $fullname) 3650 -}}
{{- $cert := genSignedCert $fullname nil (include "probed.dnsNames" $ | fromYamlArray) 3650 $ca -}}
{{- $data = dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- else if eq $which "webhook" -}}
{{- $name := include "probed.controllerName" $ -}}
{{- $old := lookup "v1" "Secret" $.Release.Namespace (printf "%s-webhook-tls" $name) -}}
{{- if and $old (index $old.data "tls.key") -}}
{{- $data = dict "ca.crt" (index $old.data "ca.crt") "tls.crt" (index $old.data "tls.crt") "tls.key" (index $old.data "tls.key") -}}
{{- else -}}
{{- $ca := genCA (printf "%s-webhook-ca" $name) 3650 -}}
{{- $cert := genSignedCert $name nil (include "probed.webhookDNSNames" $ | fromYamlArray) 3650 $ca -}}
{{- $data = dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- else if eq $which "auth" -}}
{{- $old := lookup "v1" "Secret" $.Release.Namespace (printf "%s-auth" $fullname) -}}
{{- $oldData := dict -}}
{{- if $old -}}{{- $oldData = $old.data | default dict -}}{{- end -}}
{{- $token := randAlphaNum 40 -}}
{{- if index $oldData "token" -}}{{- $token = index $oldData "token" | b64dec -}}{{- end -}}
{{- $tokens := printf "%s probed-kube\n" $token -}}
{{- $data = dict "token" ($token | b64enc) -}}
{{- if $.Values.auth.prometheus.enabled -}}
{{- $prom := randAlphaNum 40 -}}
{{- if index $oldData "prometheus-token" -}}{{- $prom = index $oldData "prometheus-token" | b64dec -}}{{- end -}}
{{- $tokens = printf "%s%s prometheus\n" $tokens $prom -}}
{{- $_ := set $data "prometheus-token" ($prom | b64enc) -}}
{{- end -}}
{{- $_ := set $data "tokens" ($tokens | b64enc) -}}
{{- else -}}
{{- fail (printf "probed.generated: unknown Secret %q" $which) -}}
{{- end -}}
{{- $_ := set $memo $which $data -}}
{{- end -}}
{{- toYaml (get $memo $which) -}}
{{- end -}}

{{/* probed's authorization policy (--authz-policy). */}}
{{- define "probed.policy" -}}
{{- $names := list "" -}}
{{- with .Values.controller.watchNamespace }}{{ $names = list (printf "%s/" .) }}{{ end -}}
{{- $rules := list (dict "identities" (list "probed-kube") "names" $names "verbs" (list "read" "write" "operate")) -}}
{{- if .Values.auth.prometheus.enabled -}}
{{- $rules = append $rules (dict "identities" (list "prometheus") "names" (list "") "verbs" (list "metrics")) -}}
{{- end -}}
{{- $rules = concat $rules .Values.auth.extraRules -}}
{{- toYaml (dict "rules" $rules) -}}
{{- end -}}

{{/* Pod scheduling and pull settings of a workload: include with (list $
.Values.probed "probed" replicas). */}}
{{- define "probed.podPlacement" -}}
{{- $ := index . 0 -}}
{{- $v := index . 1 -}}
{{- $component := index . 2 -}}
{{- $replicas := index . 3 -}}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.affinity }}
affinity: {{- toYaml $v.affinity | nindent 2 }}
{{- else if gt (int $replicas) 1 }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels: {{- include "probed.selectorLabels" (list $ $component) | nindent 12 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A workload's PodDisruptionBudget, when it has several replicas:
include with (list $ .Values.controller "controller" name replicas). */}}
{{- define "probed.pdb" -}}
{{- $ := index . 0 -}}
{{- $v := index . 1 -}}
{{- $component := index . 2 -}}
{{- $name := index . 3 -}}
{{- $replicas := index . 4 -}}
{{- if and $v.podDisruptionBudget.enabled (gt (int $replicas) 1) }}
---
# One pod at a time may be evicted (a node drain goes on), and an
# unhealthy pod always may.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  labels: {{- include "probed.labels" $ | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}
spec:
  maxUnavailable: {{ $v.podDisruptionBudget.maxUnavailable }}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels: {{- include "probed.selectorLabels" (list $ $component) | nindent 6 }}
{{- end }}
{{- end -}}

{{/* probed.labelSelector writes a label selector of the values
(matchLabels, matchExpressions) in the syntax of kubectl's -l and of
probed-kube's --namespace-selector and --pod-selector:
"team=a,tier in (web,api),!legacy". */}}
{{- define "probed.labelSelector" -}}
{{- $parts := list -}}
{{- $labels := .matchLabels | default dict -}}
{{- range $k := keys $labels | sortAlpha -}}
{{- $parts = append $parts (printf "%s=%s" $k (index $labels $k)) -}}
{{- end -}}
{{- range .matchExpressions -}}
{{- if eq .operator "In" -}}{{- $parts = append $parts (printf "%s in (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "NotIn" -}}{{- $parts = append $parts (printf "%s notin (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "Exists" -}}{{- $parts = append $parts .key -}}
{{- else if eq .operator "DoesNotExist" -}}{{- $parts = append $parts (printf "!%s" .key) -}}
{{- else -}}{{- fail (printf "label selector: unknown operator %q" .operator) -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
