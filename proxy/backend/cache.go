package backend

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// cache is a small TTL cache in front of a slow fetch. Concurrent misses
// for one key are collapsed into a single fetch (singleflight), failures
// are remembered only for errTTL so a recovering backend is seen quickly,
// and the entry count is capped because keys come from client URLs.
type cache[V any] struct {
	ttl, errTTL time.Duration
	max         int
	now         func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry[V]
	group   singleflight.Group
}

type cacheEntry[V any] struct {
	val     V
	err     error
	expires time.Time
	// panicked is set when the fetch panicked; such entries are never
	// stored.
	panicked *observe.Panic
}

func newCache[V any](ttl, errTTL time.Duration, maxEntries int, now func() time.Time) *cache[V] {
	return &cache[V]{ttl: ttl, errTTL: errTTL, max: maxEntries, now: now, entries: make(map[string]cacheEntry[V])}
}

// get returns the cached value for key, or runs fetch once for all
// concurrent callers. fetch gets a context detached from any one caller's
// cancellation (one client hanging up must not fail the others waiting
// on the same flight) but bounded by timeout. hit reports a cache hit.
func (c *cache[V]) get(ctx context.Context, key string, timeout time.Duration,
	fetch func(context.Context) (V, error)) (val V, hit bool, err error) {
	if e, ok := c.lookup(key); ok {
		return e.val, true, e.err
	}
	ch := c.group.DoChan(key, func() (r any, _ error) {
		// singleflight re-raises a panic of DoChan's function on a fresh
		// goroutine, where nothing can recover it: carry it to every
		// waiter instead, whose exchange answers 500 (and is not cached).
		defer func() {
			if v := recover(); v != nil {
				r = cacheEntry[V]{panicked: observe.CapturePanic(v)}
			}
		}()
		// A flight that finished between our lookup and DoChan has
		// already stored its result: use it instead of fetching again.
		if e, ok := c.lookup(key); ok {
			return e, nil
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		v, err := fetch(fctx)
		e := cacheEntry[V]{val: v, err: err}
		c.store(key, e)
		return e, nil
	})
	select {
	case r := <-ch:
		e := r.Val.(cacheEntry[V])
		if e.panicked != nil {
			panic(e.panicked)
		}
		return e.val, false, e.err
	case <-ctx.Done():
		var zero V
		return zero, false, ctx.Err()
	}
}

func (c *cache[V]) lookup(key string) (cacheEntry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		return cacheEntry[V]{}, false
	}
	return e, true
}

func (c *cache[V]) store(key string, e cacheEntry[V]) {
	ttl := c.ttl
	if e.err != nil {
		ttl = c.errTTL
	}
	if ttl <= 0 {
		return
	}
	now := c.now()
	e.expires = now.Add(ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, k)
			}
		}
		// Still full of live entries: drop arbitrary ones (map order is
		// random), which only costs a refetch.
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = e
}

// len returns the number of entries held, expired or not.
func (c *cache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
