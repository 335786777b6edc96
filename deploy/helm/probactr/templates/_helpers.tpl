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

{{/* Environment of a probactr container: include with (list $ own-settings "component").
The secrets arrive as files (NAME_FILE, the Secret mounted read-only), never as values in
the environment, where a job or a crash report could read them: secrets.files for every
component, plus the component's own secretFiles. */}}
{{- define "probactr.env" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- $component := index . 2 -}}
envFrom:
  - configMapRef:
      name: {{ include "probactr.fullname" $root }}-config
env:
  {{- range $name := concat $root.Values.secrets.files ((index $root.Values $component).secretFiles | default list) }}
  - name: {{ $name }}_FILE
    value: /run/secrets/probactr/{{ $name }}
  {{- end }}
  {{- range $name, $value := $own }}
  - name: {{ $name }}
    value: {{ $value | toString | quote }}
  {{- end }}
{{- end -}}

{{/* Volumes of every probactr pod: its secrets, a writable /tmp (the root filesystem is
read-only), and the TLS certificates when given. */}}
{{- define "probactr.volumes" -}}
volumes:
  - name: secrets
    secret:
      secretName: {{ include "probactr.secretName" . }}
      defaultMode: 0440
  - name: tmp
    emptyDir: {}
{{- if .Values.tls.secretName }}
  - name: tls
    secret:
      secretName: {{ .Values.tls.secretName }}
      defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "probactr.volumeMounts" -}}
volumeMounts:
  - name: secrets
    mountPath: /run/secrets/probactr
    readOnly: true
  - name: tmp
    mountPath: /tmp
{{- if .Values.tls.secretName }}
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
