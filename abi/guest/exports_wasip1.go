//go:build wasip1

package guest

import (
	"encoding/json"
	"time"
	"unsafe"

	"github.com/connhost/connhost/abi"
)

// Memory layout. The host asks for an input buffer with connhost_alloc and
// writes the operation name, key and arguments into it; the pointers it
// passes to the call exports must lie inside that buffer. The outcome is
// encoded into outbuf, which stays alive (and unchanged) until the next call.
var (
	inbuf  []byte
	outbuf []byte
)

//go:wasmexport connhost_abi_version
func exportABIVersion() int32 { return abi.Version }

//go:wasmexport connhost_alloc
func exportAlloc(size uint32) uint32 {
	if uint32(cap(inbuf)) < size || inbuf == nil {
		n := size
		if n < 4096 {
			n = 4096
		}
		inbuf = make([]byte, n)
	}
	inbuf = inbuf[:cap(inbuf)]
	return ptrOf(inbuf)
}

//go:wasmexport connhost_describe
func exportDescribe() uint64 {
	b, err := json.Marshal(Describe())
	if err != nil {
		b = nil
	}
	return publish(b)
}

//go:wasmexport connhost_execute
func exportExecute(opPtr, opLen, argsPtr, argsLen uint32) uint64 {
	return call(abi.ExportExecute, opPtr, opLen, 0, 0, argsPtr, argsLen)
}

//go:wasmexport connhost_execute_with_key
func exportExecuteWithKey(opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen uint32) uint64 {
	return call(abi.ExportExecuteWithKey, opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen)
}

//go:wasmexport connhost_reconcile
func exportReconcile(opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen uint32) uint64 {
	return call(abi.ExportReconcile, opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen)
}

func call(export string, opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen uint32) uint64 {
	op, ok1 := input(opPtr, opLen)
	key, ok2 := input(keyPtr, keyLen)
	args, ok3 := input(argsPtr, argsLen)
	var o abi.Outcome
	if !ok1 || !ok2 || !ok3 {
		o = Permanent("guest: call arguments outside the input buffer")
	} else {
		// Copy the arguments: a handler may keep them, and inbuf is reused.
		o = Invoke(wasmHost{}, export, string(op), string(key), append([]byte(nil), args...))
	}
	return publish(o.AppendBinary(outbuf[:0]))
}

// input returns the n bytes at ptr, which must lie inside inbuf.
func input(ptr, n uint32) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	if len(inbuf) == 0 {
		return nil, false
	}
	base := ptrOf(inbuf)
	if ptr < base || uint64(ptr-base)+uint64(n) > uint64(len(inbuf)) {
		return nil, false
	}
	off := ptr - base
	return inbuf[off : off+n], true
}

func publish(b []byte) uint64 {
	outbuf = b
	if len(b) == 0 {
		return 0
	}
	return abi.PackPtrLen(ptrOf(b), uint32(len(b)))
}

func ptrOf(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport connhost log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport connhost config_get
func hostConfigGet(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport connhost http_request
func hostHTTPRequest(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport connhost take
func hostTake(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport connhost now
func hostNow() int64

//go:wasmimport connhost sleep
func hostSleep(nanos int64) int32

//go:wasmimport connhost execution_id
func hostExecutionID() int32

// wasmHost implements Host with the connhost host functions.
type wasmHost struct{}

func bytesPtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
func strPtr(s string) unsafe.Pointer   { return unsafe.Pointer(unsafe.StringData(s)) }

// takePending copies the n-byte value the host holds for this call into a
// buffer of its own, which the caller may keep.
func takePending(n int32) []byte {
	if n <= 0 {
		return nil
	}
	buf := make([]byte, n)
	got := hostTake(bytesPtr(buf), uint32(n))
	if got < 0 {
		return nil
	}
	return buf[:got]
}

func (wasmHost) ExecutionID() string { return string(takePending(hostExecutionID())) }

func (wasmHost) Config(key string) (string, int32) {
	n := hostConfigGet(strPtr(key), uint32(len(key)))
	if n < 0 {
		return "", n
	}
	return string(takePending(n)), 0
}

func (wasmHost) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	size := 32 + len(req.Method) + len(req.URL) + len(req.Body)
	for _, h := range req.Header {
		size += 8 + len(h.Name) + len(h.Value)
	}
	env := req.AppendBinary(make([]byte, 0, size))
	n := hostHTTPRequest(bytesPtr(env), uint32(len(env)))
	if n < 0 {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "host refused the request envelope"}
	}
	resp, err := abi.DecodeHTTPResponse(takePending(n))
	if err != nil {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: err.Error()}
	}
	return resp
}

func (wasmHost) Log(level int32, msg string) { hostLog(level, strPtr(msg), uint32(len(msg))) }

func (wasmHost) Now() time.Time { return time.Unix(0, hostNow()) }

func (wasmHost) Sleep(d time.Duration) bool { return hostSleep(int64(d)) == 0 }
