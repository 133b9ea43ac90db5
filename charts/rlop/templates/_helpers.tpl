{{- define "rlop.name" -}}rlop{{- end -}}

{{- define "rlop.fullname" -}}
{{- if contains "rlop" .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-rlop" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "rlop.labels" -}}
app.kubernetes.io/name: rlop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rlop.selectorLabels" -}}
app.kubernetes.io/name: rlop
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rlop.prometheusUrl" -}}
{{- if .Values.prometheusUrl -}}{{ .Values.prometheusUrl }}
{{- else if .Values.prometheus.enabled -}}http://{{ include "rlop.fullname" . }}-prometheus:9090
{{- else -}}http://prometheus-operated.monitoring:9090{{- end -}}
{{- end -}}

{{/* The rules the operator needs on the namespaced resources it manages (Role or ClusterRole). */}}
{{- define "rlop.managedRules" -}}
- apiGroups: [rlop.dev]
  resources: [rljobs]
  verbs: [get, list, watch]
- apiGroups: [rlop.dev]
  resources: [rljobs/status]
  verbs: [get, patch]
- apiGroups: [apps]
  resources: [deployments, statefulsets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [apps]
  resources: [deployments/scale, statefulsets/scale]
  verbs: [patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [create, patch, delete]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# kube-scheduler's native gangs (scheduling.k8s.io/v1alpha2, alpha in 1.36): used only where served
- apiGroups: [scheduling.k8s.io]
  resources: [podgroups]
  verbs: [get, list, create, patch, delete]
{{- end -}}
