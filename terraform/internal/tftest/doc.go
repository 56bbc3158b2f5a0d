// Package tftest is the fixture the runner's and the executors' tests share: an
// Infrastructure's run objects holding a test configuration of the kubectl provider, and
// what its runs left behind.
package tftest
