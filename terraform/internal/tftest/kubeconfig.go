package tftest

import (
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes cfg as a kubeconfig file: the kubectl provider's and a
// terraformer process's.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	data, err := Kubeconfig(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o600)
}

// Kubeconfig is cfg as the content of a kubeconfig file, for the kubectl provider's
// TF_VAR_kubeconfig.
func Kubeconfig(cfg *rest.Config) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientCertificate: cfg.CertFile,
		ClientKeyData: cfg.KeyData, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["run"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "user"}
	kc.CurrentContext = "run"
	data, err := clientcmd.Write(*kc)
	return string(data), err
}
