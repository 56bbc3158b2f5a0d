package main

import (
	"context"
	"os"

	"github.com/terraseed/terraseed/terraform/terraformer"
)

func main() {
	os.Exit(terraformer.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
