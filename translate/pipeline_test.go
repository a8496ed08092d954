package translate

import (
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/route"
)

// TestFor: each inference verb has its own pipeline, chosen by the verb
// alone; the GET verbs and the zero verb have none.
func TestFor(t *testing.T) {
	tests := []struct {
		verb    route.Verb
		ok      bool
		streams bool
	}{
		{route.Predict, true, true},
		{route.Classify, true, false},
		{route.Regress, true, false},
		{route.Status, false, false},
		{route.Metadata, false, false},
		{0, false, false},
	}
	for _, tt := range tests {
		p, ok := For(tt.verb)
		if ok != tt.ok {
			t.Errorf("For(%v): ok %v, want %v", tt.verb, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if p.Verb() != tt.verb || p.Streams() != tt.streams {
			t.Errorf("For(%v): verb %v, streams %v; want %v, %v", tt.verb, p.Verb(), p.Streams(), tt.verb, tt.streams)
		}
		s := p.NewRequestStream(fixedSig(classifier), RequestOptions{})
		if (s != nil) != tt.streams {
			t.Errorf("For(%v).NewRequestStream: stream %v, want %v", tt.verb, s != nil, tt.streams)
		}
		if s != nil {
			s.Abort()
		}
	}
}
