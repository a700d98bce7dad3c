//go:build wasip1

package main

import "unsafe"

var buf []byte

//go:wasmexport connhost_abi_version
func abiVersion() int32 { return 2 }

//go:wasmexport connhost_alloc
func alloc(size uint32) uint32 {
	buf = make([]byte, size)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

//go:wasmexport connhost_describe
func describe() uint64 { return 0 }
