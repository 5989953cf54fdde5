package safetext

import "testing"

func TestUnsafe(t *testing.T) {
	for _, r := range []rune{0, '\t', '\n', '\r', 0x1b, 0x7f, 0x85, 0x9b, 0x2028, 0x2029, 0x061c, 0x200e, 0x200f,
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069} {
		if !Unsafe(r) {
			t.Errorf("Unsafe(%U) = false", r)
		}
	}
	for _, r := range []rune{'a', ' ', '-', 'é', 0x2013, 0x2065, 0x206a, 0x202f, 0xfffd} {
		if Unsafe(r) {
			t.Errorf("Unsafe(%U) = true", r)
		}
	}
}
