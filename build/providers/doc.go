// Command providers lists the Terraform providers that provider template directories require and
// mirrors them into terraform's unpacked filesystem-mirror layout, for the image's providers stage.
package main
