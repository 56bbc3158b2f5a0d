{{- if dig "cloudControllerManager" "useCustomRouteController" false .controlPlane.providerConfig -}}
{{- $pods := dig "spec" "networking" "pods" "" .cluster.shoot -}}
# The controller reaches the seed's API server (--control-kubeconfig=inClusterConfig) with
# the token of its own ServiceAccount, which may read the shoot's cloud-provider Secret and
# nothing else, and the shoot's API server with Gardener's generic kubeconfig.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: aws-custom-route-controller
  labels:
    app: kubernetes
    role: aws-custom-route-controller
# Only the pod that asks for it mounts the token.
automountServiceAccountToken: false
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: aws-custom-route-controller
  labels:
    app: kubernetes
    role: aws-custom-route-controller
rules:
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [{{ .controlPlane.secretRef.name | toJson }}]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: aws-custom-route-controller
  labels:
    app: kubernetes
    role: aws-custom-route-controller
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: aws-custom-route-controller
subjects:
  - kind: ServiceAccount
    name: aws-custom-route-controller
    namespace: {{ .controlPlane.namespace | toJson }}
---
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
  strategy:
    type: Recreate
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
        # The seed's API server, besides what every control-plane pod of the provider may reach.
        networking.gardener.cloud/to-runtime-apiserver: allowed
    spec:
      serviceAccountName: aws-custom-route-controller
      automountServiceAccountToken: true
      priorityClassName: gardener-system-300
      terminationGracePeriodSeconds: 5
      # As terraseed's own controller runs (charts/terraseed).
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
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
            - --health-probe-port=10259
            - --metrics-port=10258
            - --leader-election=true
            - --leader-election-namespace=kube-system
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
          ports:
            - name: metrics
              containerPort: 10258
            - name: healthz
              containerPort: 10259
          livenessProbe:
            httpGet:
              path: /healthz
              port: 10259
            initialDelaySeconds: 30
          readinessProbe:
            httpGet:
              path: /readyz
              port: 10259
            initialDelaySeconds: 5
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
            limits:
              memory: 512Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: kubeconfig
              mountPath: /var/run/secrets/gardener.cloud/shoot/generic-kubeconfig
              readOnly: true
      volumes:
        - name: tmp
          emptyDir: {}
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
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: aws-custom-route-controller
  labels:
    app: kubernetes
    role: aws-custom-route-controller
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: kubernetes
      role: aws-custom-route-controller
  unhealthyPodEvictionPolicy: AlwaysAllow
{{- end }}
