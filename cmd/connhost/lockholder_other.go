//go:build !linux

package main

// lockHolder cannot name the holder on this platform.
func lockHolder(path string) int { return 0 }
