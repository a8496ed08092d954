//go:build tfsbridge_poison

package tfresponse

// poisonReleased: see poison_off.go. Run the adapters' and e2e tests
// with -tags tfsbridge_poison to catch a piece used after its release.
const poisonReleased = true

// poison overwrites released memory with a byte no TF body holds.
func poison(b []byte) {
	for i := range b {
		b[i] = 0xA5
	}
}
