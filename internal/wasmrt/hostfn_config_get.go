package wasmrt

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// maxConfigKeyBytes bounds a config key.
const maxConfigKeyBytes = 256

// hostConfigGet is abi.ImportConfigGet:
//
//	config_get(key_ptr wasmI32, key_len wasmI32) -> wasmI32
//
// Parameters: key_ptr and key_len locate the key's name in guest memory.
//
// Results: the length of the value, now pending for take; or
// abi.StatusNotDeclared when the manifest's capabilities.config does not
// list the key; abi.StatusNotSet when neither Options.NamespaceConfig
// (for the call's namespace) nor Options.Config has a value for it;
// abi.StatusBadRequest when the key lies outside guest memory or is
// longer than 256 bytes.
//
// Memory: reads key_len bytes at key_ptr. Nothing is written; the value is
// copied out by take.
//
// Values are never logged, and a denied key is not an error of the call.
var hostConfigGet = &hostFunction{
	name:        abi.ImportConfigGet,
	fn:          configGetFn,
	params:      []api.ValueType{wasmI32, wasmI32},
	paramNames:  []string{"key_ptr", "key_len"},
	results:     []api.ValueType{wasmI32},
	resultNames: []string{"len_or_status"},
}

func configGetFn(ctx context.Context, mod api.Module, stack []uint64) {
	cc := callOf(ctx)
	key, ok := readGuest(mod, uint32(stack[0]), uint32(stack[1]), maxConfigKeyBytes)
	if cc == nil || !ok {
		stack[0] = status(abi.StatusBadRequest)
		return
	}
	c := cc.inst.c
	if !c.configOK[string(key)] {
		stack[0] = status(abi.StatusNotDeclared)
		return
	}
	v, found := "", false
	if nc := c.rt.opts.NamespaceConfig; nc != nil && cc.namespace != "" {
		v, found = nc(cc.namespace, c.name, string(key))
	}
	if !found {
		v, found = c.rt.opts.Config(c.name, string(key))
	}
	if !found {
		stack[0] = status(abi.StatusNotSet)
		return
	}
	stack[0] = uint64(uint32(setPending(cc, []byte(v))))
}

// status encodes a negative abi.Status* code as an wasmI32 result.
func status(code int32) uint64 { return uint64(uint32(code)) }
