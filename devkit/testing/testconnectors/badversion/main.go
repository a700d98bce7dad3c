// Command badversion is a test connector that reports ABI version 2, which
// the host must refuse with an error naming both versions. It is written
// without the guest SDK (whose version export always reports abi.Version);
// the exports live in exports_wasip1.go.
package main

func main() {}
