package observe

import (
	"fmt"
	"runtime/debug"
)

// Panic is a panic recovered on one goroutine and carried to another. A
// helper goroutine (a shared metadata fetch, a readiness check) that
// panics would otherwise end the process; it recovers with CapturePanic
// and hands the *Panic to the exchange it worked for, whose own goroutine
// re-panics with it, so that the adapter's per-exchange recovery answers
// that exchange and logs the helper's stack.
type Panic struct {
	// Value is what the helper panicked with.
	Value any
	// Stack is the helper's stack at the panic.
	Stack []byte
}

// CapturePanic wraps a value just recovered; call it in the deferred
// function that recovered, so that the stack is the panicking one.
func CapturePanic(v any) *Panic {
	if p, ok := v.(*Panic); ok {
		return p
	}
	return &Panic{Value: v, Stack: debug.Stack()}
}

// Error implements error, so that a *Panic can travel as one.
func (p *Panic) Error() string { return fmt.Sprintf("panic: %v", p.Value) }
