package main

import (
	"context"
	"os"

	"github.com/terraseed/terraseed/terraform"
)

func main() {
	os.Exit(terraform.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
