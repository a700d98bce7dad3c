package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// The scripted model's one call: a payment of 500 cents, under the id
// RECIPE_CALL_ID; each request is counted in the file RECIPE_COUNT (so
// that a killed process's requests count too).
const tool = "payments_create_payment"

var args = map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}

// step is the model's next turn, from the last tool result (answered
// false: none yet) and how many calls the conversation holds: a call's id,
// or its final text. Like a real model, it gives every call it issues a
// new id; it issues the call again when told the call did not run and may
// be issued again, or when asked again without the first call's result.
func step(last string, answered bool, calls int) (callID, text string) {
	if f, err := os.OpenFile(os.Getenv("RECIPE_COUNT"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.WriteString("request\n")
		_ = f.Close()
	}
	switch {
	case !answered && calls == 0:
		return os.Getenv("RECIPE_CALL_ID"), ""
	case !answered, strings.Contains(last, "If it is still wanted, issue it again."):
		return fmt.Sprintf("%s-%d", os.Getenv("RECIPE_CALL_ID"), calls+1), ""
	}
	return "", "tool said: " + last
}

// responseText is the adapter's "message" field of a response, or the
// response as JSON.
func responseText(r map[string]any) string {
	if s, ok := r["message"].(string); ok {
		return s
	}
	b, _ := json.Marshal(r)
	return string(b)
}
