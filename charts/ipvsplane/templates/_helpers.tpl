{{/* The chart's name. */}}
{{- define "ipvsplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, with the chart's name added unless it is in it. */}}
{{- define "ipvsplane.fullname" -}}
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

{{/* The labels the pods are selected by. */}}
{{- define "ipvsplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ipvsplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels. */}}
{{- define "ipvsplane.labels" -}}
{{ include "ipvsplane.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ include "ipvsplane.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image's tag. */}}
{{- define "ipvsplane.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* The port of a bind address (host:port) of the configuration. */}}
{{- define "ipvsplane.port" -}}
{{- regexFind "[0-9]+$" . }}
{{- end }}

{{/* "true" for a bind address on loopback (127.0.0.0/8, ::1, localhost). */}}
{{- define "ipvsplane.loopback" -}}
{{- if or (hasPrefix "127." .) (hasPrefix "[::1]" .) (hasPrefix "localhost" .) }}true{{ end }}
{{- end }}

{{/* The pods' ServiceAccount: the chart's, or an existing one. */}}
{{- define "ipvsplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ipvsplane.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Values the schema cannot refuse, refused with what to change: the API
server's host without its port would be dialled on the port of the
`kubernetes` Service's environment (443), not the API server's; a host
with a scheme or a port would not be dialled at all.
*/}}
{{- define "ipvsplane.validate" -}}
{{- $host := .Values.apiServer.host | toString }}
{{- $port := .Values.apiServer.port | toString }}
{{- if and $host (not $port) }}
{{- fail "apiServer.host is set without apiServer.port: give the port the API server listens on (6443 on kubeadm's clusters), as kube-proxy's kubeconfig names it" }}
{{- end }}
{{- if or (contains "/" $host) (contains "[" $host) (eq (len (splitList ":" $host)) 2) }}
{{- fail (printf "apiServer.host %q: give the host name or address alone, without scheme, path or port (the port goes in apiServer.port)" $host) }}
{{- end }}
{{- if and $port (not $host) }}
{{- fail "apiServer.port is set without apiServer.host: give the API server's address as well, or neither" }}
{{- end }}
{{- end }}
