package main

// The tests start the controller in this process more than once.
func init() { skipControllerNameValidation = true }
