{{/* Name of every object: the release name, or release-chart when the release name does not contain the chart's. */}}
{{- define "tfsbridge.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the pods of this release. */}}
{{- define "tfsbridge.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: tfsbridge
{{- end -}}

{{/* Labels on every object. */}}
{{- define "tfsbridge.labels" -}}
{{ include "tfsbridge.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tfsbridge.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image tag: values or the chart's appVersion. */}}
{{- define "tfsbridge.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* The model map's ConfigMap, or nothing when no map is configured. */}}
{{- define "tfsbridge.modelMapConfigMap" -}}
{{- if .Values.modelMap.existingConfigMap -}}
{{- .Values.modelMap.existingConfigMap -}}
{{- else if .Values.modelMap.content -}}
{{- printf "%s-model-map" (include "tfsbridge.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The cluster Istio generates for the tfsbridge Service's gRPC port. */}}
{{- define "tfsbridge.istioCluster" -}}
{{- printf "outbound|%v||%s.%s.svc.%s" .Values.service.grpcPort (include "tfsbridge.fullname" .) .Release.Namespace .Values.istio.clusterDomain -}}
{{- end -}}

{{/* True (non-empty) when bodies stream (bodyMode full-duplex); fails on a bodyMode tfsbridge and the data planes do not share. */}}
{{- define "tfsbridge.fullDuplex" -}}
{{- if not (has .Values.bodyMode (list "buffered" "full-duplex")) -}}
{{- fail (printf "bodyMode %q: want buffered or full-duplex" .Values.bodyMode) -}}
{{- end -}}
{{- if eq .Values.bodyMode "full-duplex" -}}true{{- end -}}
{{- end -}}
