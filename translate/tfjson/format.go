package tfjson

// Format is the TF Serving request format, which decides the response
// format: row ("instances" in, "predictions" out) or columnar ("inputs" in,
// "outputs" out).
type Format uint8

// The request formats.
const (
	Row Format = iota + 1
	Columnar
)

// String returns "row" or "columnar".
func (f Format) String() string {
	switch f {
	case Row:
		return "row"
	case Columnar:
		return "columnar"
	}
	return "unknown"
}
