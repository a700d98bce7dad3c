//go:build !temporal

package main

import (
	"context"
	"errors"
)

func openTemporal(context.Context, *env) (func(context.Context) error, func(), error) {
	return nil, nil, errors.New("built without Temporal")
}
