{{- define "gpupaas.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpupaas.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpupaas.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpupaas.serviceAccountName" -}}
{{- default (include "gpupaas.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "gpupaas.teamRole" -}}
{{- printf "%s-team" (include "gpupaas.fullname" .) -}}
{{- end -}}

{{/* The environment every container of the portal gets. */}}
{{- define "gpupaas.env" -}}
- name: DJANGO_SETTINGS_MODULE
  value: gpupaas.settings.production
- name: SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.secretKey.existingSecret | quote }}, key: {{ .Values.secretKey.key | quote }}}}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.database.existingSecret | quote }}, key: {{ .Values.database.key | quote }}}}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.redis.existingSecret | quote }}, key: {{ .Values.redis.key | quote }}}}
- name: ALLOWED_HOSTS
  value: {{ .Values.host | quote }}
# With the watch process running, status and inventory follow watch streams and the periodic
# lists become the slow safety net.
- name: ORCHESTRATION_WATCH
  value: {{ ternary "true" "false" .Values.watch.enabled | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ printf "https://%s" .Values.host | quote }}
- name: PORTAL_URL
  value: {{ printf "https://%s" .Values.host | quote }}
# One proxy (the ingress controller) appends the client's address.
- name: TRUSTED_PROXY_COUNT
  value: "1"
# Notebooks and endpoints as HTTPRoutes on the platform's Gateway, or as Ingresses.
{{- with .Values.gateway }}
{{- if .enabled }}
- name: TRAFFIC_API
  value: gateway-api
- name: GATEWAY_NAME
  value: {{ .name | quote }}
- name: GATEWAY_NAMESPACE
  value: {{ .namespace | quote }}
- name: GATEWAY_LISTENER
  value: {{ ternary "workloads" .workloadsListener .create | quote }}
- name: GATEWAY_IMPLEMENTATION
  value: {{ .implementation | quote }}
- name: GATEWAY_PROXY_NAMESPACE
  value: {{ .proxyNamespace | quote }}
{{- if eq .implementation "external-auth" }}
- name: GATEWAY_AUTH_SERVICE
  value: {{ printf "%s/%s-web:80" $.Release.Namespace (include "gpupaas.fullname" $) | quote }}
{{- end }}
{{- else }}
- name: TRAFFIC_API
  value: ingress
{{- end }}
{{- end }}
{{- if .Values.rbac.create }}
- name: K8S_PORTAL_SERVICE_ACCOUNT
  value: {{ printf "%s/%s" .Release.Namespace (include "gpupaas.serviceAccountName" .) | quote }}
- name: K8S_PORTAL_TEAM_ROLE
  value: {{ include "gpupaas.teamRole" . | quote }}
{{- end }}
{{- with .Values.prometheus.url }}
- name: PROMETHEUS_URL
  value: {{ . | quote }}
{{- end }}
{{- if .Values.prometheus.metricsToken.existingSecret }}
- name: METRICS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ .Values.prometheus.metricsToken.existingSecret | quote }}, key: {{ .Values.prometheus.metricsToken.key | quote }}}}
{{- end }}
{{- if .Values.oidc.issuer }}
- name: OIDC_OP_ISSUER
  value: {{ .Values.oidc.issuer | quote }}
- name: OIDC_RP_CLIENT_ID
  value: {{ .Values.oidc.clientId | quote }}
- name: OIDC_RP_CLIENT_SECRET
  valueFrom: {secretKeyRef: {name: {{ .Values.oidc.existingSecret | quote }}, key: {{ .Values.oidc.key | quote }}}}
{{- range $name, $key := dict "OIDC_OP_AUTHORIZATION_ENDPOINT" "authorizationEndpoint" "OIDC_OP_TOKEN_ENDPOINT" "tokenEndpoint" "OIDC_OP_USER_ENDPOINT" "userEndpoint" "OIDC_OP_JWKS_ENDPOINT" "jwksEndpoint" "OIDC_OP_LOGOUT_ENDPOINT" "logoutEndpoint" }}
{{- with index $.Values.oidc $key }}
- name: {{ $name }}
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- with .Values.oidc.adminGroups }}
- name: OIDC_ADMIN_GROUPS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.oidc.operatorGroups }}
- name: OIDC_OPERATOR_GROUPS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.oidc.auditorGroups }}
- name: OIDC_AUDITOR_GROUPS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.oidc.billingGroups }}
- name: OIDC_BILLING_GROUPS
  value: {{ join "," . | quote }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.settings }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{- define "gpupaas.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* Pod spec fields shared by every component; .automount: whether it talks to Kubernetes. */}}
{{- define "gpupaas.podCommon" -}}
serviceAccountName: {{ include "gpupaas.serviceAccountName" .root }}
automountServiceAccountToken: {{ .automount }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {sizeLimit: 256Mi}
{{- if and .automount .root.Values.remoteClusters.existingSecret }}
  - name: clusters
    secret:
      secretName: {{ .root.Values.remoteClusters.existingSecret | quote }}
      defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "gpupaas.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end -}}
