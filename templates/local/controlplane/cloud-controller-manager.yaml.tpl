{{- $ccm := dig "cloudControllerManager" dict .controlPlane.providerConfig -}}
{{- $gates := list -}}
{{- range $name, $enabled := dig "featureGates" dict $ccm }}{{ $gates = append $gates (printf "%s=%t" $name $enabled) }}{{ end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cloud-controller-manager
  labels:
    app: cloud-controller-manager
spec:
  replicas: {{ dig "replicas" 1 $ccm }}
  revisionHistoryLimit: 2
  selector:
    matchLabels:
      app: cloud-controller-manager
  template:
    metadata:
      labels:
        app: cloud-controller-manager
      annotations:
        # A changed cloud-provider config (made of these inputs) rolls the pods.
        checksum/cloud-provider-config: {{ list .controlPlane.namespace .controlPlane.region .controlPlane.infrastructureProviderStatus | toJson | sha256sum | toJson }}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
      containers:
        - name: cloud-controller-manager
          image: {{ dig "image" "registry.k8s.io/pause:3.10" $ccm | toJson }}
          args:
            - --cloud-provider=local
            - --cloud-config=/etc/kubernetes/cloudprovider/cloudprovider.conf
            - --cluster-name={{ .controlPlane.namespace }}
            {{- if $gates }}
            - {{ printf "--feature-gates=%s" (join "," $gates) | toJson }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: 10258
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - name: cloud-provider-config
              mountPath: /etc/kubernetes/cloudprovider
              readOnly: true
            - name: cloudprovider
              mountPath: /srv/cloudprovider
              readOnly: true
      volumes:
        - name: cloud-provider-config
          configMap:
            name: cloud-provider-config
        # The credentials reach the pod from the secret itself; their values never pass
        # through a rendered object.
        - name: cloudprovider
          secret:
            secretName: {{ .controlPlane.secretRef.name | toJson }}
---
apiVersion: v1
kind: Service
metadata:
  name: cloud-controller-manager
  labels:
    app: cloud-controller-manager
spec:
  selector:
    app: cloud-controller-manager
  ports:
    - name: metrics
      port: 10258
      targetPort: metrics
