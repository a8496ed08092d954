package tfrequest

import "github.com/tfsbridge/tfsbridge/translate/jsontext"

// An instance object missing an input prints its own dump ("keys must be
// equal to"), known to be needed only at its end. Dumping every instance
// as it is read would put each on the slow path (a DumpStream fed token by
// token); instead its text is kept, a byte copy per chunk, up to
// instRawMax, and dumped only if it misses a key. A longer one hands its
// text to a dumper (a tokenizer feeding a DumpStream), which reads the rest
// as it arrives until the 256-byte dump is full. An instance that has
// named every input drops its text: an image's b64 string is not held
// twice.

// instRawMax is how much of an instance object's text is kept as is.
const instRawMax = 64 << 10

// instDump is the open instance object's dump-to-be.
type instDump struct {
	on    bool
	depth int     // stack index of the instance object
	from  int     // where its text resumes in the chunk being written
	raw   []byte  // its text so far, while at most instRawMax long
	sub   *dumper // the dumper reading it once longer
}

// dumper renders the dump of the value whose text it is written.
type dumper struct {
	tz jsontext.Tokenizer
	s  jsontext.DumpStream
}

// newDumper returns a dumper of the value text starts.
func newDumper(maxDepth int, text []byte) *dumper {
	d := &dumper{}
	d.tz.Reset(jsontext.Limits{MaxDepth: maxDepth})
	d.s.Reset(nil)
	d.write(text)
	return d
}

// write feeds the next bytes of the text to the dump until it is full.
func (d *dumper) write(b []byte) {
	for p := 0; !d.s.Full(); {
		tok, q := d.tz.Next(b, p)
		if tok.Kind == jsontext.NeedMore {
			break
		}
		d.s.Feed(tok)
		p = q
	}
	d.tz.EndChunk(len(b))
}

// instDumpFeed passes the next bytes of the instance's text on.
func (d *Decoder) instDumpFeed(b []byte) {
	in := &d.inst
	switch {
	case in.sub != nil:
		in.sub.write(b)
	case len(in.raw)+len(b) <= instRawMax:
		in.raw = append(in.raw, b...)
	default:
		in.sub = newDumper(d.lim.MaxDepth, in.raw)
		in.sub.write(b)
	}
}

// instDumpBytes returns the dump of the instance object that just ended.
func (d *Decoder) instDumpBytes() []byte {
	in := &d.inst
	if in.sub == nil {
		in.sub = newDumper(d.lim.MaxDepth, in.raw)
	}
	return in.sub.s.Bytes()
}
