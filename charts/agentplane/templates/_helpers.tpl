{{- /* At most 49 characters: the longest suffix (-control-plane) keeps Service names within 63. */ -}}
{{- define "agentplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 49 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 49 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agentplane.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: agentplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agentplane.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "agentplane.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "agentplane.agentNamespace" -}}
{{- default .Release.Namespace .Values.agentNamespace -}}
{{- end -}}

{{- define "agentplane.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* Names of every pull secret for agent and build pods: imagePullSecrets then agents.imagePullSecrets. */ -}}
{{- define "agentplane.pullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- if kindIs "string" . }}{{ $names = append $names . }}{{ else }}{{ $names = append $names .name }}{{ end }}
{{- end }}
{{- join "," (uniq (concat $names .Values.agents.imagePullSecrets)) }}
{{- end -}}

{{- define "agentplane.bootstrapSecretName" -}}
{{- default (printf "%s-bootstrap" (include "agentplane.fullname" .)) .Values.controlPlane.bootstrapApiKey.existingSecret -}}
{{- end -}}

{{- /* A label map as k=v,k2=v2 (sorted keys). */ -}}
{{- define "agentplane.labelList" -}}
{{- $out := list -}}
{{- range $k, $v := . -}}
{{- $out = append $out (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{- /* GitHub App settings as environment variables; the webhook secret only when `webhook` is true. */ -}}
{{- define "agentplane.githubEnv" -}}
{{- $gh := .root.Values.github -}}
{{- if $gh.appId }}
{{- if not $gh.existingSecret }}{{ fail "github.appId needs github.existingSecret (the App's private key and webhook secret)" }}{{ end }}
- name: AGENTPLANE_GITHUB_APP_ID
  value: {{ $gh.appId | quote }}
- name: AGENTPLANE_GITHUB_API_URL
  value: {{ $gh.apiUrl | quote }}
{{- if $gh.webUrl }}
- name: AGENTPLANE_GITHUB_WEB_URL
  value: {{ $gh.webUrl | quote }}
{{- end }}
{{- if $gh.appSlug }}
- name: AGENTPLANE_GITHUB_APP_SLUG
  value: {{ $gh.appSlug | quote }}
{{- end }}
- name: AGENTPLANE_GITHUB_APP_PRIVATE_KEY
  valueFrom:
    secretKeyRef: { name: {{ $gh.existingSecret | quote }}, key: {{ $gh.privateKeyKey | quote }} }
{{- if .webhook }}
- name: AGENTPLANE_GITHUB_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef: { name: {{ $gh.existingSecret | quote }}, key: {{ $gh.webhookSecretKey | quote }}, optional: true }
{{- end }}
{{- if and .webhook $gh.clientId }}
- name: AGENTPLANE_GITHUB_APP_CLIENT_ID
  value: {{ $gh.clientId | quote }}
- name: AGENTPLANE_GITHUB_APP_CLIENT_SECRET
  valueFrom:
    secretKeyRef: { name: {{ $gh.existingSecret | quote }}, key: {{ $gh.clientSecretKey | quote }} }
{{- end }}
{{- end }}
{{- end -}}

{{- /*
Where and how a platform pod runs: the component's own value (.values: controlPlane, operator, listener, uninstall)
when set, else the chart-wide default of the same name. Maps of annotations and labels are merged, the component's
keys winning; the chart's own labels always win, so podLabels can never change which pods a Deployment selects.
A topologySpreadConstraint without a labelSelector spreads the component's own pods.
*/ -}}
{{- define "agentplane.podMetadata" -}}
{{- $v := .root.Values -}}
{{- $c := .values -}}
{{- $labels := merge (fromYaml (include "agentplane.labels" .root)) (dict "app.kubernetes.io/component" .component) (default dict $c.podLabels) (default dict $v.podLabels) -}}
{{- $annotations := merge (dict) (default dict $c.podAnnotations) (default dict $v.podAnnotations) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "agentplane.podScheduling" -}}
{{- $v := .root.Values -}}
{{- $c := .values -}}
{{- with (default $v.priorityClassName $c.priorityClassName) }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with (default $v.nodeSelector $c.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $v.tolerations $c.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $v.affinity $c.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $v.topologySpreadConstraints $c.topologySpreadConstraints) }}
{{- $selector := fromYaml (include "agentplane.selector" (dict "root" $.root "component" $.component)) }}
topologySpreadConstraints:
{{- range . }}
  - {{- toYaml (ternary . (merge (dict "labelSelector" (dict "matchLabels" $selector)) .) (hasKey . "labelSelector")) | nindent 4 }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* A component ServiceAccount's annotations (IRSA role, GKE Workload Identity): component keys over the default. */ -}}
{{- define "agentplane.serviceAccountAnnotations" -}}
{{- $c := default dict .values.serviceAccount -}}
{{- $g := default dict .root.Values.serviceAccount -}}
{{- with merge (dict) (default dict $c.annotations) (default dict $g.annotations) }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /* A PodDisruptionBudget for a component running more than one replica (a drain then keeps one serving). */ -}}
{{- define "agentplane.podDisruptionBudget" -}}
{{- /* default: a release upgraded with --reuse-values from a chart without this value has none. */ -}}
{{- $pdb := default dict .root.Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .replicas) 1) }}
{{- if and (hasKey $pdb "minAvailable") (hasKey $pdb "maxUnavailable") }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (a PodDisruptionBudget takes one)" }}
{{- end }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ printf "%s-%s" (include "agentplane.fullname" .root) .component }}
  labels:
    {{- include "agentplane.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if hasKey $pdb "minAvailable" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ hasKey $pdb "maxUnavailable" | ternary $pdb.maxUnavailable 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "agentplane.selector" (dict "root" .root "component" .component) | nindent 6 }}
{{- end }}
{{- end -}}
