{{- if dig "cloudControllerManager" "useCustomRouteController" false .controlPlane.providerConfig -}}
{{- $pods := dig "spec" "networking" "pods" "" .cluster.shoot -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: aws-custom-route-controller
  labels:
    app: kubernetes
    role: aws-custom-route-controller
spec:
  replicas: 1
  revisionHistoryLimit: 1
  selector:
    matchLabels:
      app: kubernetes
      role: aws-custom-route-controller
  template:
    metadata:
      labels:
        app: kubernetes
        role: aws-custom-route-controller
        gardener.cloud/role: controlplane
    spec:
      automountServiceAccountToken: false
      containers:
        - name: aws-custom-route-controller
          image: europe-docker.pkg.dev/gardener-project/releases/gardener/aws-custom-route-controller:v0.15.0
          command:
            - /aws-custom-route-controller
            - --control-kubeconfig=inClusterConfig
            - --namespace={{ .controlPlane.namespace }}
            - --cluster-name={{ .controlPlane.namespace }}
            - --target-kubeconfig=/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig
            {{- if $pods }}
            - {{ printf "--pod-network-cidr=%s" $pods | toJson }}
            {{- end }}
            - {{ printf "--region=%s" .controlPlane.region | toJson }}
          env:
            - name: AWS_ACCESS_KEY_ID
              valueFrom:
                secretKeyRef:
                  name: {{ .controlPlane.secretRef.name | toJson }}
                  key: accessKeyID
            - name: AWS_SECRET_ACCESS_KEY
              valueFrom:
                secretKeyRef:
                  name: {{ .controlPlane.secretRef.name | toJson }}
                  key: secretAccessKey
          volumeMounts:
            - name: kubeconfig
              mountPath: /var/run/secrets/gardener.cloud/shoot/generic-kubeconfig
              readOnly: true
      volumes:
        - name: kubeconfig
          projected:
            defaultMode: 420
            sources:
              - secret:
                  name: generic-token-kubeconfig
                  items:
                    - key: kubeconfig
                      path: kubeconfig
              - secret:
                  name: shoot-access-aws-custom-route-controller
                  items:
                    - key: token
                      path: token
{{- end }}
