{{- $ccm := dig "cloudControllerManager" dict .controlPlane.providerConfig -}}
{{- $gates := list -}}
{{- range $name, $enabled := dig "featureGates" dict $ccm }}{{ $gates = append $gates (printf "%s=%t" $name $enabled) }}{{ end -}}
{{- $version := dig "spec" "kubernetes" "version" "1.33.0" .cluster.shoot -}}
{{- $minor := index (splitList "." $version) 1 -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cloud-controller-manager
  labels:
    app: kubernetes
    role: cloud-controller-manager
spec:
  replicas: 1
  revisionHistoryLimit: 1
  selector:
    matchLabels:
      app: kubernetes
      role: cloud-controller-manager
  template:
    metadata:
      labels:
        app: kubernetes
        role: cloud-controller-manager
        gardener.cloud/role: controlplane
      annotations:
        checksum/cloud-provider-config: {{ list .controlPlane.namespace .controlPlane.infrastructureProviderStatus | toJson | sha256sum | toJson }}
    spec:
      automountServiceAccountToken: false
      priorityClassName: gardener-system-300
      # As terraseed's own controller runs (charts/terraseed).
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: cloud-controller-manager
          image: {{ printf "registry.k8s.io/provider-aws/cloud-controller-manager:v1.%s.0" $minor | toJson }}
          command:
            - /bin/aws-cloud-controller-manager
            - --allocate-node-cidrs=false
            - --cloud-provider=aws
            - --cloud-config=/etc/kubernetes/cloudprovider/cloudprovider.conf
            - --cluster-name={{ .controlPlane.namespace }}
            - --configure-cloud-routes=false
            - --kubeconfig=/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig
            - --authentication-kubeconfig=/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig
            - --authorization-kubeconfig=/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig
            - --leader-elect=true
            - --secure-port=10258
            {{- if $gates }}
            - {{ printf "--feature-gates=%s" (join "," $gates) | toJson }}
            {{- end }}
            - --v=2
          env:
            # The credentials come from the secret itself; their values never pass through
            # a rendered object.
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
            - name: AWS_REGION
              value: {{ .controlPlane.region | toJson }}
          ports:
            - name: metrics
              containerPort: 10258
          livenessProbe:
            httpGet:
              path: /healthz
              scheme: HTTPS
              port: 10258
            initialDelaySeconds: 15
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
            - name: cloud-provider-config
              mountPath: /etc/kubernetes/cloudprovider
            - name: kubeconfig
              mountPath: /var/run/secrets/gardener.cloud/shoot/generic-kubeconfig
              readOnly: true
      volumes:
        - name: tmp
          emptyDir: {}
        - name: cloud-provider-config
          configMap:
            name: cloud-provider-config
        # Gardener's generic kubeconfig for the shoot and the token it mounts.
        - name: kubeconfig
          projected:
            defaultMode: 420
            sources:
              - secret:
                  name: generic-token-kubeconfig
                  items:
                    - key: kubeconfig
                      path: kubeconfig
                  optional: false
              - secret:
                  name: shoot-access-cloud-controller-manager
                  items:
                    - key: token
                      path: token
                  optional: false
---
# As Gardener's AWS extension: an eviction may take the one replica, and an unhealthy pod
# never blocks a drain.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: cloud-controller-manager
  labels:
    app: kubernetes
    role: cloud-controller-manager
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: kubernetes
      role: cloud-controller-manager
  unhealthyPodEvictionPolicy: AlwaysAllow
---
apiVersion: v1
kind: Service
metadata:
  name: cloud-controller-manager
  labels:
    app: kubernetes
    role: cloud-controller-manager
spec:
  type: ClusterIP
  clusterIP: None
  selector:
    app: kubernetes
    role: cloud-controller-manager
  ports:
    - name: metrics
      port: 10258
      protocol: TCP
