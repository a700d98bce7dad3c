package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// openDBOS runs DBOS Transact for Go on a database of the same PostgreSQL
// server: a workflow with one step (dbos.RunAsStep), started with
// dbos.RunWorkflow and awaited with GetResult. DBOS records the
// workflow's start, the step's outcome and the workflow's end.
func openDBOS(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	dsn, err := e.dsn(ctx)
	if err != nil {
		return nil, nil, err
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "peerbench", DatabaseURL: dsn + "&pool_max_conns=" + fmt.Sprint(maxConns), Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	wf := func(ctx dbos.Context, i int64) (int64, error) {
		return dbos.RunAsStep(ctx, func(context.Context) (int64, error) { return effect(i) })
	}
	dbos.RegisterWorkflow(dctx, wf, dbos.WithWorkflowName("peerbench.one-step"))
	if err := dbos.Launch(dctx); err != nil {
		return nil, nil, err
	}
	var seq atomic.Int64
	op := func(context.Context) error {
		i := seq.Add(1)
		h, err := dbos.RunWorkflow(dctx, wf, i)
		if err != nil {
			return err
		}
		got, err := h.GetResult()
		if err == nil && got != i {
			err = fmt.Errorf("dbos: workflow returned %d, want %d", got, i)
		}
		return err
	}
	return op, func() { _ = dbos.Shutdown(dctx, 10*time.Second) }, nil
}
