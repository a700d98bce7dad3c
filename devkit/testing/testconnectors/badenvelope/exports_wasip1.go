//go:build wasip1

package main

import (
	"unsafe"

	"github.com/connhost/connhost/abi"
)

var inbuf, outbuf []byte

func ptrOf(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmexport connhost_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport connhost_alloc
func alloc(size uint32) uint32 {
	if uint32(len(inbuf)) < size || inbuf == nil {
		inbuf = make([]byte, size+64)
	}
	return ptrOf(inbuf)
}

//go:wasmexport connhost_describe
func describe() uint64 {
	outbuf = []byte(description)
	return abi.PackPtrLen(ptrOf(outbuf), uint32(len(outbuf)))
}

//go:wasmexport connhost_execute
func execute(opPtr, opLen, argsPtr, argsLen uint32) uint64 {
	off := opPtr - ptrOf(inbuf)
	op := string(inbuf[off : off+opLen])
	out, p, n, raw := respond(op)
	if raw {
		return abi.PackPtrLen(p, n)
	}
	outbuf = out
	return abi.PackPtrLen(ptrOf(outbuf), uint32(len(outbuf)))
}
