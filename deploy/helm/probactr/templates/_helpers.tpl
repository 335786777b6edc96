{{/* Names and labels shared by every object of the chart. */}}
{{- define "probactr.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "probactr.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include with (list $ "executor"). */}}
{{- define "probactr.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "probactr.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "probactr.secretName" -}}
{{- if .Values.secrets.create -}}{{ printf "%s-secrets" (include "probactr.fullname" .) }}{{- else -}}{{ required "secrets.existingSecret names the Secret with DATABASE_URL, REDIS_URL and PROBACTR_SECRET_KEY (or set secrets.create)" .Values.secrets.existingSecret }}{{- end -}}
{{- end -}}

{{/* The drain timeout in seconds, from config.PROBACTR_DRAIN_TIMEOUT (e.g. 30s, 2m). */}}
{{- define "probactr.drainSeconds" -}}
{{- $d := toString (.Values.config.PROBACTR_DRAIN_TIMEOUT | default "30s") -}}
{{- if hasSuffix "ms" $d -}}{{ div (trimSuffix "ms" $d | atoi) 1000 }}
{{- else if hasSuffix "s" $d -}}{{ trimSuffix "s" $d | atoi }}
{{- else if hasSuffix "m" $d -}}{{ mul (trimSuffix "m" $d | atoi) 60 }}
{{- else if hasSuffix "h" $d -}}{{ mul (trimSuffix "h" $d | atoi) 3600 }}
{{- else -}}{{ fail (printf "config.PROBACTR_DRAIN_TIMEOUT: %q is not a duration like 30s" $d) }}
{{- end -}}
{{- end -}}

{{/* Environment of every probactr container: the Secret, the ConfigMap, the component's own. */}}
{{- define "probactr.env" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
envFrom:
  - secretRef:
      name: {{ include "probactr.secretName" $root }}
  - configMapRef:
      name: {{ include "probactr.fullname" $root }}-config
{{- with $own }}
env:
  {{- range $name, $value := . }}
  - name: {{ $name }}
    value: {{ $value | toString | quote }}
  {{- end }}
{{- end }}
{{- end -}}

{{- define "probactr.tlsVolume" -}}
{{- if .Values.tls.secretName }}
volumes:
  - name: tls
    secret:
      secretName: {{ .Values.tls.secretName }}
      defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "probactr.tlsMount" -}}
{{- if .Values.tls.secretName }}
volumeMounts:
  - name: tls
    mountPath: /etc/probactr/tls
    readOnly: true
{{- end }}
{{- end -}}

{{- define "probactr.metricsAnnotations" -}}
{{- if .Values.metrics.annotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
