{{/* The release namespace: every namespaced object, the Service the webhooks call, the Namespace. */}}
{{- define "gpu-admission.namespace" -}}
{{ .Release.Namespace }}
{{- end }}

{{/* Helm's own labels, on top of the labels manifests/ sets (the kustomize install sets
app.kubernetes.io/managed-by: kustomize instead). */}}
{{- define "gpu-admission.helmLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* failurePolicy of the enforcing entries (and the mutating ones): components/fail-open. */}}
{{- define "gpu-admission.failurePolicy" -}}
{{ ternary "Ignore" "Fail" .Values.failOpen }}
{{- end }}

{{/* caBundle: cert-manager's cainjector fills it; otherwise certificates.caBundle. */}}
{{- define "gpu-admission.caBundle" -}}
{{- if not .Values.certificates.certManager }}
caBundle: {{ required "certificates.caBundle is required when certificates.certManager is false" .Values.certificates.caBundle }}
{{- end }}
{{- end }}

{{/* namespaceSelector of an entry: (list $ "enforce") for the enforcing and mutating entries,
(list $ "audit") for the audit-* entries. mode enforce = manifests/base, mode audit = components/audit. */}}
{{- define "gpu-admission.namespaceSelector" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $excluded := concat $root.Values.namespaceSelector.excludedNamespaces (list (include "gpu-admission.namespace" $root)) | uniq -}}
{{- $mode := dict "key" "gpu-admission.io/mode" -}}
{{- if eq $root.Values.mode "audit" -}}
{{- if eq $role "enforce" }}{{ $_ := set $mode "operator" "In" }}{{ $_ := set $mode "values" (list "enforce") }}
{{- else }}{{ $_ := set $mode "operator" "NotIn" }}{{ $_ := set $mode "values" (list "enforce" "off") }}{{ end -}}
{{- else -}}
{{- if eq $role "enforce" }}{{ $_ := set $mode "operator" "NotIn" }}{{ $_ := set $mode "values" (list "audit" "off") }}
{{- else }}{{ $_ := set $mode "operator" "In" }}{{ $_ := set $mode "values" (list "audit") }}{{ end -}}
{{- end -}}
{{- $expressions := list (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $excluded) $mode -}}
{{- toYaml (dict "matchExpressions" (concat $expressions $root.Values.namespaceSelector.matchExpressions)) }}
{{- end }}

{{/* The DRA entries of components/dra: (list $ "mutate") or (list $ "validate"), at indentation 0
(the caller indents). */}}
{{- define "gpu-admission.draWebhook" -}}
{{- $root := index . 0 -}}
{{- $verb := index . 1 -}}
{{- $class := $root.Values.dra.deviceClassName -}}
- name: {{ $verb }}-resourceclaims.gpu-admission.io
  admissionReviewVersions: ["v1"]
  sideEffects: None
  timeoutSeconds: {{ $root.Values.timeoutSeconds }}
  failurePolicy: {{ include "gpu-admission.failurePolicy" $root }}
  matchPolicy: Equivalent
  {{- if eq $verb "mutate" }}
  reinvocationPolicy: IfNeeded
  {{- end }}
  clientConfig:
    {{- include "gpu-admission.caBundle" $root | nindent 4 }}
    service:
      namespace: {{ include "gpu-admission.namespace" $root }}
      name: gpu-admission
      path: /{{ $verb }}
      port: 443
  rules:
    - apiGroups: ["resource.k8s.io"]
      apiVersions: ["v1"]
      resources: [resourceclaims, resourceclaimtemplates]
      operations: {{ ternary "[CREATE]" "[CREATE, UPDATE]" (eq $verb "mutate") }}
      scope: Namespaced
  namespaceSelector:
    {{- include "gpu-admission.namespaceSelector" (list $root "enforce") | nindent 4 }}
  matchConditions:
    - name: requests-nvidia-gpu-devices
      expression: |-
        object != null &&
        (request.kind.kind == 'ResourceClaim' ? [object.spec] :
          (has(object.spec.spec) ? [object.spec.spec] : []))
        .exists(s, has(s.devices) && has(s.devices.requests) && s.devices.requests.exists(r,
          (has(r.exactly) && r.exactly.deviceClassName == '{{ $class }}') ||
          (has(r.firstAvailable) && r.firstAvailable.exists(a, a.deviceClassName == '{{ $class }}'))))
{{- end }}
