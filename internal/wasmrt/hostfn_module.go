package wasmrt

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// hostFunction describes one function of the abi.HostModule module. Each
// lives in its own hostfn_<name>.go file with its documentation.
type hostFunction struct {
	name        string
	fn          api.GoModuleFunc
	params      []api.ValueType
	paramNames  []string
	results     []api.ValueType
	resultNames []string
}

// hostFunctions is the whole host module, in ABI order.
var hostFunctions = []*hostFunction{
	hostLog,
	hostConfigGet,
	hostHTTPRequest,
	hostTake,
	hostNow,
	hostSleep,
	hostExecutionID,
}

// instantiateHostModule defines abi.HostModule in a connector's runtime.
func instantiateHostModule(ctx context.Context, wrt wazero.Runtime) error {
	b := wrt.NewHostModuleBuilder(abi.HostModule)
	for _, f := range hostFunctions {
		b.NewFunctionBuilder().
			WithGoModuleFunction(f.fn, f.params, f.results).
			WithParameterNames(f.paramNames...).
			WithResultNames(f.resultNames...).
			Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("host: instantiate host module %s: %w", abi.HostModule, err)
	}
	return nil
}

// readGuest returns a copy of n bytes of guest memory at ptr, or false when
// the range lies outside memory or n exceeds max. It never panics.
func readGuest(mod api.Module, ptr, n, max uint32) ([]byte, bool) {
	if n > max {
		return nil, false
	}
	mem := mod.Memory()
	if mem == nil {
		return nil, false
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

// setPending makes v the value the next take copies out and returns its
// length, the result of the host functions that produce values.
func setPending(cc *callCtx, v []byte) int32 {
	cc.inst.pending, cc.inst.hasPending = v, true
	return int32(len(v))
}
