// Package soak kills the controller and its terraform processes at random while
// Infrastructures are created, changed and deleted, and checks that nothing was lost or
// left behind (`make soak`).
package soak
