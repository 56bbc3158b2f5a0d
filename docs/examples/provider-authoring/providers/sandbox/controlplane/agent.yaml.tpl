{{- $config := .controlPlane.providerConfig -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: sandbox-agent
data:
  network: {{ dig "network" "name" "" .controlPlane.infrastructureProviderStatus | toJson }}
  logLevel: {{ dig "logLevel" "info" $config | toJson }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sandbox-agent
spec:
  replicas: {{ dig "replicas" 1 $config }}
  selector:
    matchLabels:
      app: sandbox-agent
  template:
    metadata:
      labels:
        app: sandbox-agent
    spec:
      containers:
        - name: agent
          image: registry.k8s.io/pause:3.10
          envFrom:
            - configMapRef:
                name: sandbox-agent
          volumeMounts:
            - name: credentials
              mountPath: /credentials
              readOnly: true
      volumes:
        - name: credentials
          secret:
            secretName: {{ .controlPlane.secretRef.name | toJson }}
