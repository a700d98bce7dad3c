package manifests_test

import (
	"errors"
	"fmt"

	"github.com/connhost/connhost/manifests"
)

func ExampleParse() {
	m, err := manifests.Parse("payments.toml", []byte(`
[connector]
name = "payments"
version = "1.0.0"
abi = 1
module = "payments.wasm"

[capabilities]
http = ["https://api.stripe.com:443"]

[[operation]]
name = "create_payment"
description = "Charge a card."
effect = "external"
recovery = "idempotent-retry"
requires_approval = true
input_schema = '{"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}'
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	op, _ := m.Operation("create_payment")
	fmt.Println(op.Recovery, op.RequiresApproval, op.ApprovalTTL, op.MaxAttempts, m.Limits.Timeout)
	fmt.Println(op.ValidateArgs([]byte(`{"amount": "ten"}`)))

	_, err = manifests.Parse("broken.toml", []byte(`
[connector]
name = "payments"
version = "1.0.0"
abi = 2
module = "payments.wasm"
sha256 = "xyz"
`))
	fmt.Println(errors.Is(err, manifests.ErrInvalid))
	fmt.Println(err)
	// Output:
	// idempotent-retry true 1h0m0s 3 15s
	// manifests: invalid arguments for create_payment: /amount: got string, want integer
	// true
	// broken.toml:0: operation: at least one [[operation]] is required
	// broken.toml:5: connector.abi: abi 2 not supported: connhost implements abi 1
	// broken.toml:7: connector.sha256: must be 64 lower-case hex characters or empty (unpinned)
}
