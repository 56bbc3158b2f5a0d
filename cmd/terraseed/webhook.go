package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/terraseed/terraseed/controller/webhook"
)

// webhookOptions configure the control-plane webhook.
type webhookOptions struct {
	mode          string
	port          int
	host          string
	certDir       string
	namespace     string
	service       string
	secret        string
	configuration string
}

func (o *webhookOptions) bind(flags *flag.FlagSet) {
	flags.StringVar(&o.mode, "webhook-mode", "off", "how the API server calls the control-plane webhook: service (through --webhook-service), url (https://<--webhook-host>:<--webhook-port>) or off")
	flags.IntVar(&o.port, "webhook-port", 9443, "port the control-plane webhook listens on")
	flags.StringVar(&o.host, "webhook-host", "localhost", "DNS name the API server reaches this process by, with --webhook-mode=url")
	flags.StringVar(&o.certDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "terraseed-webhook"), "directory the webhook's serving certificate and key are written to")
	flags.StringVar(&o.namespace, "webhook-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the webhook's certificate Secret and Service")
	flags.StringVar(&o.service, "webhook-service", "terraseed-webhook", "Service in --webhook-namespace that reaches the webhook's port, with --webhook-mode=service")
	flags.StringVar(&o.secret, "webhook-secret", "terraseed-webhook-cert", "Secret in --webhook-namespace holding the webhook's CA and serving certificate, created and rotated by the controller")
	flags.StringVar(&o.configuration, "webhook-configuration", "terraseed-controlplane", "name of the MutatingWebhookConfiguration the controller registers")
}

// build returns the webhook, or nil when it is off.
func (o webhookOptions) build() (*webhook.Webhook, error) {
	opts := webhook.Options{
		Port:              o.port,
		CertDir:           o.certDir,
		Namespace:         o.namespace,
		SecretName:        o.secret,
		ConfigurationName: o.configuration,
	}
	switch o.mode {
	case "off":
		return nil, nil
	case "service":
		opts.ServiceName = o.service
	case "url":
		opts.URL = "https://" + net.JoinHostPort(o.host, strconv.Itoa(o.port))
	default:
		return nil, fmt.Errorf("--webhook-mode: %q is not service, url or off", o.mode)
	}
	w, err := webhook.New(opts)
	if err != nil {
		return nil, fmt.Errorf("--webhook-mode=%s: %w", o.mode, err)
	}
	return w, nil
}
